package watchdog

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// meters are the watchdog's instruments, when Options.Meter is set.
type meters struct {
	batch metric.Int64Histogram
	reg   metric.Registration // the observable counters' callback
}

// newMeters registers w's instruments on m: its running totals as
// observable counters (read from Stats at each collection, so a tick pays
// nothing for them) and a histogram of keys per renew call.
func newMeters(w *Watchdog, m metric.Meter) (*meters, error) {
	batch, err1 := m.Int64Histogram("latchkey.watchdog.batch.size", metric.WithUnit("{key}"),
		metric.WithDescription("Keys per renew call."),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
	renewed, err2 := m.Int64ObservableCounter("latchkey.watchdog.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Leases found held and extended."))
	failed, err3 := m.Int64ObservableCounter("latchkey.watchdog.renewal.failures", metric.WithUnit("{call}"),
		metric.WithDescription("Renew calls that failed (retried until the lease's local deadline)."))
	kept, err4 := m.Int64ObservableUpDownCounter("latchkey.watchdog.leases", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases being kept."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("%w: creating the watchdog's instruments: %w", ErrInvalidOptions, err)
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := w.Stats()
		o.ObserveInt64(renewed, int64(s.Renewed))
		o.ObserveInt64(failed, int64(s.Errors))
		o.ObserveInt64(kept, int64(w.Len()))
		return nil
	}, renewed, failed, kept)
	if err != nil {
		return nil, fmt.Errorf("%w: registering the watchdog's instruments: %w", ErrInvalidOptions, err)
	}
	return &meters{batch: batch, reg: reg}, nil
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
