package notify

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// fakeMeter records what the hub's instruments measure, so a test can read
// a counter or an observable by name. It stands in for an SDK, which the notify
// module does not depend on; attributes are ignored (summed over).
type fakeMeter struct {
	noop.Meter

	mu          sync.Mutex
	counters    map[string]int64
	observables map[metric.Int64Observable]string
	callback    metric.Callback
}

func newFakeMeter() *fakeMeter {
	return &fakeMeter{counters: make(map[string]int64), observables: make(map[metric.Int64Observable]string)}
}

type fakeCounter struct {
	noop.Int64Counter
	m    *fakeMeter
	name string
}

func (c fakeCounter) Add(_ context.Context, n int64, _ ...metric.AddOption) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.counters[c.name] += n
}

// fakeObservable is a pointer so that each one is a distinct map key.
type fakeObservable struct {
	noop.Int64ObservableUpDownCounter
}

func (m *fakeMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return fakeCounter{m: m, name: name}, nil
}

func (m *fakeMeter) Int64ObservableUpDownCounter(name string, _ ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	g := &fakeObservable{}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observables[g] = name
	return g, nil
}

func (m *fakeMeter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.callback = f
	return noop.Registration{}, nil
}

func (m *fakeMeter) counter(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counters[name]
}

// collect runs the registered callback, as a collection would, and returns
// the values it observed, by instrument name.
func (m *fakeMeter) collect(t *testing.T) map[string]int64 {
	t.Helper()
	m.mu.Lock()
	f := m.callback
	m.mu.Unlock()
	require.NotNil(t, f, "no callback registered")
	o := &fakeObserver{m: m, values: make(map[string]int64)}
	require.NoError(t, f(t.Context(), o))
	return o.values
}

type fakeObserver struct {
	noop.Observer
	m      *fakeMeter
	values map[string]int64
}

func (o *fakeObserver) ObserveInt64(g metric.Int64Observable, v int64, _ ...metric.ObserveOption) {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	o.values[o.m.observables[g]] += v
}
