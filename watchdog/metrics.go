package watchdog

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// meters are the watchdog's instruments, when Options.Meter is set.
type meters struct {
	batch   metric.Int64Histogram
	renewed metric.Int64Counter
	failed  metric.Int64Counter
	reg     metric.Registration // the leases' callback
}

// newMeters registers w's instruments on m: its renewals and failed calls
// as counters, added to as each tick ends, a histogram of keys per renew
// call, and the leases kept as an observable up-down counter.
//
// The counters are synchronous, not observed from Stats: the Clients of a
// process share a MeterProvider, whose SDK sums their observations, and a
// closed watchdog's callback is unregistered, so an observed total would
// drop by its renewals when one closed, which Prometheus reads as a
// counter reset (rate() of the failures then shows failures that never
// happened). What was added stays added. The leases may drop with their
// watchdog: they are no longer kept.
func newMeters(w *Watchdog, m metric.Meter) (*meters, error) {
	batch, err1 := m.Int64Histogram("latchkey.watchdog.batch.size", metric.WithUnit("{key}"),
		metric.WithDescription("Keys per renew call."),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
	renewed, err2 := m.Int64Counter("latchkey.watchdog.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Leases found held and extended."))
	failed, err3 := m.Int64Counter("latchkey.watchdog.renewal.failures", metric.WithUnit("{call}"),
		metric.WithDescription("Renew calls that failed (retried until the lease's local deadline)."))
	kept, err4 := m.Int64ObservableUpDownCounter("latchkey.watchdog.leases", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases being kept."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("%w: creating the watchdog's instruments: %w", ErrInvalidOptions, err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(kept, int64(w.Len()))
		return nil
	}, kept)
	if err != nil {
		return nil, fmt.Errorf("%w: registering the watchdog's instruments: %w", ErrInvalidOptions, err)
	}
	return &meters{batch: batch, renewed: renewed, failed: failed, reg: reg}, nil
}

// recordTick adds a tick's renewals and failed calls, as Stats does.
func (ms *meters) recordTick(renewed, failed uint64) {
	if ms == nil {
		return
	}
	if renewed > 0 {
		ms.renewed.Add(context.Background(), int64(renewed))
	}
	if failed > 0 {
		ms.failed.Add(context.Background(), int64(failed))
	}
}

func (ms *meters) recordBatch(keys int) {
	if ms != nil {
		ms.batch.Record(context.Background(), int64(keys))
	}
}

func (ms *meters) close() {
	if ms != nil {
		_ = ms.reg.Unregister()
	}
}
