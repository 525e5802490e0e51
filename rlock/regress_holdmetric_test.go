package rlock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/latchkey/latchkey/internal/luascripts"
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
	for _, tc := range []struct {
		name string
		heir bool // the grant is a handover from a hold of the same client
	}{
		{"contender", false},
		{"heir", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			plain := privateRedis(ctx, t)

			var c *Client
			var armed atomic.Bool
			granting := make(chan struct{}) // the held grant ran in Redis
			hooked := newScriptHooks(plain)
			holdGrant := func(call func() rueidis.RedisResult) rueidis.RedisResult {
				if !armed.CompareAndSwap(true, false) {
					return call()
				}
				r := call()
				close(granting)
				<-c.closing.Done()
				return r
			}
			if tc.heir {
				hooked.on(luascripts.Release, holdGrant) // the release hands the lock over
			} else {
				hooked.on(luascripts.Acquire, holdGrant)
			}
			waiting := make(chan string, 1)
			meter := &countingMeter{n: make(map[string]int64)}
			var err error
			c, err = NewClient(hooked, Options{MeterProvider: countingProvider{m: meter}, OnWait: func(name string) {
				select {
				case waiting <- name:
				default:
				}
			}})
			require.NoError(t, err)
			m := c.Mutex(t.Name())

			var holder context.Context
			unlocked := make(chan error, 1)
			if tc.heir {
				holder, err = m.Lock(ctx)
				require.NoError(t, err)
			}
			locked := make(chan error, 1)
			armed.Store(!tc.heir)
			go func() {
				_, err := m.Lock(ctx)
				locked <- err
			}()
			if tc.heir {
				<-waiting // queued behind holder, in the turn
				armed.Store(true)
				go func() { unlocked <- m.Unlock(holder) }()
			}
			select {
			case <-granting:
			case <-time.After(10 * time.Second):
				t.Fatal("no grant")
			}
			require.NoError(t, c.Close())
			select {
			case err := <-locked:
				require.ErrorIs(t, err, ErrClosed)
			case <-time.After(10 * time.Second):
				t.Fatal("the Lock did not return after Close")
			}
			if tc.heir {
				require.NoError(t, <-unlocked)
			}

			acquired := meter.count("latchkey.lock.acquisitions")
			require.EqualValues(t, btoi(tc.heir), acquired, "the holder's acquisition, if any; the grant cut short is none")
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
