package rlock

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// countingMeter counts what the lock instruments record, by instrument
// name: the calls of a histogram, the sum of a counter. It stands in for
// an SDK, which this module does not depend on; attributes are ignored.
type countingMeter struct {
	noop.Meter
	mu sync.Mutex
	n  map[string]int64
}

func (m *countingMeter) add(name string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[name] += n
}

func (m *countingMeter) count(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[name]
}

func (m *countingMeter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return countingHistogram{m: m, name: name}, nil
}

func (m *countingMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return countingCounter{m: m, name: name}, nil
}

type countingHistogram struct {
	noop.Float64Histogram
	m    *countingMeter
	name string
}

func (h countingHistogram) Record(context.Context, float64, ...metric.RecordOption) {
	h.m.add(h.name, 1)
}

type countingCounter struct {
	noop.Int64Counter
	m    *countingMeter
	name string
}

func (c countingCounter) Add(_ context.Context, n int64, _ ...metric.AddOption) { c.m.add(c.name, n) }

type countingProvider struct {
	noop.MeterProvider
	m *countingMeter
}

func (p countingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// TestRegressHoldTimeOnlyAcquired: a grant that never became a caller's
// hold records no hold time. A grant turned back at once (after Close, or
// after its waiter gave up) was adopted as a hold and released, and its
// release recorded latchkey.lock.hold.duration, so hold counts exceeded
// acquisitions. The grant's reply is held until Close is under way: for a
// contender's own grant, and for a handover to a local heir.
func TestRegressHoldTimeOnlyAcquired(t *testing.T) {
	for _, heir := range []bool{false, true} {
		t.Run(map[bool]string{false: "contender", true: "heir"}[heir], func(t *testing.T) {
			meter := &countingMeter{n: make(map[string]int64)}
			grantCutByClose(t, heir, 0, Options{MeterProvider: countingProvider{m: meter}}, func(rueidis.Client, *Mutex) {})
			acquired := meter.count("latchkey.lock.acquisitions")
			require.EqualValues(t, btoi(heir), acquired, "the holder's acquisition, if any; the grant cut short is none")
			require.Equal(t, acquired, meter.count("latchkey.lock.hold.duration"), "hold times recorded, one per acquisition")
			require.Zero(t, meter.count("latchkey.lock.lost"))
		})
	}
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
