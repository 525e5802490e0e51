package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey/latchkey/watchdog"
)

// Metrics and traces (OpenTelemetry API only: the application brings the
// SDK). With neither provider set the observer is nil and every method
// below returns at once: a Lock pays one nil check.

// instrumentation is the meter's and tracer's name.
const instrumentation = "github.com/latchkey/latchkey"

// Attribute keys. The lock name is one only with Options.MetricsLockName:
// names are unbounded, attribute sets should not be.
const (
	attrKind    = attribute.Key("latchkey.kind")    // mutex, rwmutex_read, rwmutex_write, semaphore; spin_ before a spin variant's
	attrOutcome = attribute.Key("latchkey.outcome") // acquired, timeout, cancelled, error
	attrReentry = attribute.Key("latchkey.reentry")
	attrCause   = attribute.Key("latchkey.cause") // gone, renewal_failed, lease_ended, other
	attrLock    = attribute.Key("latchkey.lock")
)

// observer records one client's lock instruments and wait spans.
type observer struct {
	nameAttr  bool
	wait      metric.Float64Histogram
	hold      metric.Float64Histogram
	acquired  metric.Int64Counter
	contended metric.Int64Counter
	lost      metric.Int64Counter
	wakeups   metric.Int64Counter
	tracer    trace.Tracer // nil: no spans
	meter     metric.Meter // nil: no metrics (passed to watchdog and notify)
}

// newObserver returns nil when o asks for neither metrics nor traces.
func newObserver(o Options) (*observer, error) {
	if o.MeterProvider == nil && o.TracerProvider == nil {
		return nil, nil
	}
	ob := &observer{nameAttr: o.MetricsLockName}
	if o.TracerProvider != nil {
		ob.tracer = o.TracerProvider.Tracer(instrumentation)
	}
	mp := o.MeterProvider
	if mp != nil {
		ob.meter = mp.Meter(instrumentation)
	} else {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(instrumentation)
	var errs [6]error
	ob.wait, errs[0] = m.Float64Histogram("latchkey.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from Lock or TryLock to its outcome (not re-entries), by outcome: acquired, timeout, cancelled, error."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	ob.hold, errs[1] = m.Float64Histogram("latchkey.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a grant to its last Unlock, or to its loss."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
	ob.acquired, errs[2] = m.Int64Counter("latchkey.lock.acquisitions", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Locks acquired, re-entries (latchkey.reentry=true) included."))
	ob.contended, errs[3] = m.Int64Counter("latchkey.lock.contended", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Lock and TryLock calls that had to wait (the lock was busy at their first try), whatever their outcome."))
	ob.lost, errs[4] = m.Int64Counter("latchkey.lock.lost", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds lost before their Unlock, by cause: gone (deleted or expired in Redis), renewal_failed, lease_ended, other."))
	ob.wakeups, errs[5] = m.Int64Counter("latchkey.lock.wakeups.sent", metric.WithUnit("{message}"),
		metric.WithDescription("Releases that woke a queued client (one message each); local handovers send none."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("%w: creating latchkey's instruments: %w", ErrInvalidOptions, err)
	}
	return ob, nil
}

// attrs are the attributes of a lock's instruments, plus extra.
func (ob *observer) attrs(kind, name string, extra ...attribute.KeyValue) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, 2+len(extra))
	kv = append(kv, attrKind.String(kind))
	if ob.nameAttr {
		kv = append(kv, attrLock.String(name))
	}
	return metric.WithAttributes(append(kv, extra...)...)
}

// metricKind is a primitive's latchkey.kind: base, after "spin_" for a
// spin variant.
func metricKind(base string, spin bool) string {
	if spin {
		return "spin_" + base
	}
	return base
}

func (m *Mutex) metricKind() string { return metricKind("mutex", m.spin) }

// acquireObs follows one Lock or TryLock (of any primitive) that is not a
// re-entry.
type acquireObs struct {
	ob     *observer
	kind   string
	name   string
	ctx    context.Context
	start  time.Time
	waited bool
	span   trace.Span // set at the first wait, when tracing
}

// begin starts following an acquire of the lock name of kind; nil when ob
// is.
func (ob *observer) begin(ctx context.Context, kind, name string) *acquireObs {
	if ob == nil {
		return nil
	}
	return &acquireObs{ob: ob, kind: kind, name: name, ctx: ctx, start: time.Now()}
}

// waiting marks the acquire as contended, and opens its span (from the
// acquire's start) at its first wait: only waits are spans.
func (a *acquireObs) waiting() {
	if a == nil || a.waited {
		return
	}
	a.waited = true
	if a.ob.tracer != nil {
		_, a.span = a.ob.tracer.Start(a.ctx, "latchkey.lock.wait", trace.WithTimestamp(a.start), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrKind.String(a.kind), attrLock.String(a.name)))
	}
}

// end records the acquire's outcome.
func (a *acquireObs) end(ctx context.Context, err error) {
	if a == nil {
		return
	}
	outcome := "acquired"
	switch {
	case err == nil:
	case errors.Is(err, errBusy):
		outcome = "timeout"
	case ctx.Err() != nil || errors.Is(err, ErrClosed):
		outcome = "cancelled"
	default:
		outcome = "error"
	}
	elapsed := time.Since(a.start)
	a.ob.wait.Record(context.Background(), elapsed.Seconds(), a.ob.attrs(a.kind, a.name, attrOutcome.String(outcome)))
	if a.waited {
		a.ob.contended.Add(context.Background(), 1, a.ob.attrs(a.kind, a.name))
	}
	if err == nil {
		a.ob.acquired.Add(context.Background(), 1, a.ob.attrs(a.kind, a.name, attrReentry.Bool(false)))
	}
	if a.span != nil {
		a.span.SetAttributes(attrOutcome.String(outcome))
		if outcome == "error" {
			a.span.SetStatus(codes.Error, err.Error())
		}
		a.span.End()
	}
}

// woke records a Mutex release that woke a queued client.
func (ob *observer) woke(kind, name string) {
	if ob == nil {
		return
	}
	ob.wakeups.Add(context.Background(), 1, ob.attrs(kind, name))
}

// reentered records a re-entry that succeeded.
func (ob *observer) reentered(kind, name string) {
	if ob == nil {
		return
	}
	ob.acquired.Add(context.Background(), 1, ob.attrs(kind, name, attrReentry.Bool(true)))
}

// ended records a hold's end: its duration, and its loss when cause is
// not nil.
func (ob *observer) ended(kind, name string, granted time.Time, cause error) {
	if ob == nil {
		return
	}
	ob.hold.Record(context.Background(), time.Since(granted).Seconds(), ob.attrs(kind, name))
	if cause != nil {
		ob.lost.Add(context.Background(), 1, ob.attrs(kind, name, attrCause.String(lossCause(cause))))
	}
}

// lossCause names why a hold was lost, for latchkey.lock.lost.
func lossCause(cause error) string {
	var lease *leaseEndError
	switch {
	case errors.Is(cause, watchdog.ErrGone), errors.Is(cause, errFoundGone):
		return "gone"
	case errors.Is(cause, watchdog.ErrExpired):
		return "renewal_failed"
	case errors.As(cause, &lease):
		return "lease_ended"
	}
	return "other"
}

// notifyMeter is the meter the hub records on; nil when metrics are off.
func (ob *observer) notifyMeter() metric.Meter {
	if ob == nil {
		return nil
	}
	return ob.meter
}
