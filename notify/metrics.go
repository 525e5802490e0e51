package notify

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meters are the hub's instruments, when Options.Meter is set.
type meters struct {
	received  metric.Int64Counter
	unclaimed metric.Int64Counter
	one, all  metric.MeasurementOption
	reg       metric.Registration
}

// newMeters registers h's instruments on m; it returns nil when they cannot
// be created (the hub then records nothing: metrics never stop a wait).
func newMeters(h *Hub, m metric.Meter) *meters {
	received, err1 := m.Int64Counter("latchkey.notify.wakeups.received", metric.WithUnit("{message}"),
		metric.WithDescription("Wake-up messages received, by latchkey.wakeup: one (wakes one waiter) or all (a broadcast)."))
	unclaimed, err2 := m.Int64Counter("latchkey.notify.wakeups.unclaimed", metric.WithUnit("{message}"),
		metric.WithDescription("Wake-up messages dropped because one was already pending for the channel's waiters, or because the channel had none (it was lingering)."))
	// Up-down counters, not gauges: the Clients of a process share a
	// MeterProvider and each observes its own hub's channels under the
	// same attributes. The SDK sums the observations of an up-down counter
	// and keeps only the last of a gauge's, which read one Client's
	// channels as the process's.
	subs, err3 := m.Int64ObservableUpDownCounter("latchkey.notify.subscriptions", metric.WithUnit("{channel}"),
		metric.WithDescription("Channels this process is subscribed to (one per lock with local waiters, or waited for within the linger), lingering ones included."))
	// An instrument of its own, not an attribute of the one above: the total
	// stays one series, as dashboards already read it, and this one is a
	// part of it.
	lingering, err4 := m.Int64ObservableUpDownCounter("latchkey.notify.lingering", metric.WithUnit("{channel}"),
		metric.WithDescription("Of latchkey.notify.subscriptions, the channels with no waiter left, kept for the linger so that the next waiter need not subscribe."))
	if errors.Join(err1, err2, err3, err4) != nil {
		return nil
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		open, idle := h.counts()
		o.ObserveInt64(subs, int64(open))
		o.ObserveInt64(lingering, int64(idle))
		return nil
	}, subs, lingering)
	if err != nil {
		return nil
	}
	// Not latchkey.kind, which names a lock's primitive on rlock's
	// instruments: a dashboard grouping by it would mix the two.
	wakeup := attribute.Key("latchkey.wakeup")
	return &meters{received: received, unclaimed: unclaimed, reg: reg,
		one: metric.WithAttributes(wakeup.String("one")), all: metric.WithAttributes(wakeup.String("all"))}
}

func (ms *meters) receivedOne(claimed bool) {
	if ms == nil {
		return
	}
	ms.received.Add(context.Background(), 1, ms.one)
	if !claimed {
		ms.unclaimed.Add(context.Background(), 1)
	}
}

func (ms *meters) receivedAll() {
	if ms != nil {
		ms.received.Add(context.Background(), 1, ms.all)
	}
}

func (ms *meters) close() {
	if ms != nil {
		_ = ms.reg.Unregister()
	}
}
