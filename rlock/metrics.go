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
	attrKind    = attribute.Key("latchkey.kind")    // kindNames
	attrOutcome = attribute.Key("latchkey.outcome") // acquired, timeout, cancelled, error
	attrReentry = attribute.Key("latchkey.reentry")
	attrCause   = attribute.Key("latchkey.cause") // gone, renewal_failed, lease_ended, other
	attrLock    = attribute.Key("latchkey.lock")
)

// lockKind is a primitive's latchkey.kind, each spin variant after its
// pub/sub kind: an enum, so that naming it costs nothing with metrics off.
type lockKind uint8

const (
	kindMutex lockKind = iota
	kindSpinMutex
	kindRead
	kindSpinRead
	kindWrite
	kindSpinWrite
	kindSemaphore
	kindSpinSemaphore
	kindCountDownLatch // Await's wait, and the zero's wake-up; no holds
	kindMultiMutex     // its Lock and TryLock calls; its members' holds are kindMutex
	numKinds
)

var kindNames = [numKinds]string{"mutex", "spin_mutex", "rwmutex_read", "spin_rwmutex_read",
	"rwmutex_write", "spin_rwmutex_write", "semaphore", "spin_semaphore", "countdown_latch", "multimutex"}

// spinIf is k's spin variant when spin is set.
func (k lockKind) spinIf(spin bool) lockKind {
	if spin {
		return k + 1
	}
	return k
}

// variant is what a measurement adds to the lock's attributes: nothing, an
// outcome, whether it re-entered, or why a hold was lost.
type variant uint8

const (
	plain variant = iota
	outAcquired
	outTimeout
	outCancelled
	outError
	firstEntry
	reentry
	lostGone
	lostRenewal
	lostLease
	lostOther
	numVariants
)

var variantAttrs = [numVariants]attribute.KeyValue{
	outAcquired:  attrOutcome.String("acquired"),
	outTimeout:   attrOutcome.String("timeout"),
	outCancelled: attrOutcome.String("cancelled"),
	outError:     attrOutcome.String("error"),
	firstEntry:   attrReentry.Bool(false),
	reentry:      attrReentry.Bool(true),
	lostGone:     attrCause.String("gone"),
	lostRenewal:  attrCause.String("renewal_failed"),
	lostLease:    attrCause.String("lease_ended"),
	lostOther:    attrCause.String("other"),
}

// counter is one of the observer's counters.
type counter uint8

const (
	acquisitions counter = iota
	contentions
	losses
	wakeups
	forceUnlocks
	leaks
	numCounters
)

var counterSpecs = [numCounters]struct{ name, unit, desc string }{
	acquisitions: {"latchkey.lock.acquisitions", "{acquisition}", "Locks acquired, re-entries (latchkey.reentry=true) included."},
	contentions:  {"latchkey.lock.contended", "{acquisition}", "Lock and TryLock calls that found the lock busy, those that waited and tries refused without a wait, and Awaits that waited (the latch was set), whatever their outcome."},
	losses:       {"latchkey.lock.lost", "{hold}", "Holds lost before their Unlock, by cause: gone (deleted or expired in Redis), renewal_failed, lease_ended, other."},
	wakeups:      {"latchkey.lock.wakeups.sent", "{message}", "Releases that woke a queued client, and latch count-downs whose zero reached a subscribed client (one message each); local handovers send none."},
	forceUnlocks: {"latchkey.lock.force_unlocks", "{lock}", "Locks this client deleted with ForceUnlock; their holders count them as lost (gone)."},
	leaks:        {"latchkey.lock.leaked", "{level}", "Lock contexts of live holds that became unreachable without their Unlock; latchkey unlocked them."},
}

// observer records one client's lock instruments and wait spans.
type observer struct {
	nameAttr bool
	// sets holds every attribute set a measurement can have when the lock
	// name is not one of them: built once, so a measurement allocates none.
	sets     [numKinds][numVariants]metric.MeasurementOption
	wait     metric.Float64Histogram
	hold     metric.Float64Histogram
	counters [numCounters]metric.Int64Counter
	tracer   trace.Tracer // nil: no spans
	meter    metric.Meter // nil: no metrics (passed to watchdog and notify)
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
	var errs [2 + numCounters]error
	ob.wait, errs[0] = m.Float64Histogram("latchkey.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from Lock or TryLock (not re-entries), or a latch's Await, to its outcome: acquired (for Await: the count reached zero), timeout (TryLock's wait or the context's deadline ran out), cancelled (context cancelled, client closed), error."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	ob.hold, errs[1] = m.Float64Histogram("latchkey.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a grant to its last Unlock, or to its loss."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
	for i, c := range counterSpecs {
		ob.counters[i], errs[2+i] = m.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
	}
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("%w: creating latchkey's instruments: %w", ErrInvalidOptions, err)
	}
	if !ob.nameAttr {
		for k := range numKinds {
			for v := range numVariants {
				ob.sets[k][v] = metric.WithAttributeSet(attribute.NewSet(attrList(k, "", false, v)...))
			}
		}
	}
	return ob, nil
}

// attrList is the attributes of a measurement of kind k, of the lock name
// when withName is set, and of v.
func attrList(k lockKind, name string, withName bool, v variant) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 1, 3)
	kv[0] = attrKind.String(kindNames[k])
	if withName {
		kv = append(kv, attrLock.String(name))
	}
	if v != plain {
		kv = append(kv, variantAttrs[v])
	}
	return kv
}

// attrs are the attributes of a measurement on the lock name of kind k.
func (ob *observer) attrs(k lockKind, name string, v variant) metric.MeasurementOption {
	if !ob.nameAttr {
		return ob.sets[k][v]
	}
	return metric.WithAttributes(attrList(k, name, true, v)...)
}

// acquireObs follows one Lock or TryLock (of any primitive) that is not a
// re-entry, or one Await of a latch.
type acquireObs struct {
	ob     *observer
	kind   lockKind
	name   string
	ctx    context.Context
	start  time.Time
	waited bool
	span   trace.Span // set at the first wait, when tracing
}

// begin starts following an acquire of the lock name of kind k; nil when ob
// is.
func (ob *observer) begin(ctx context.Context, k lockKind, name string) *acquireObs {
	if ob == nil {
		return nil
	}
	return &acquireObs{ob: ob, kind: k, name: name, ctx: ctx, start: time.Now()}
}

// waiting marks the acquire as contended, and opens its span (from the
// acquire's start) at its first wait: only waits are spans. A span is one
// event, so the lock name is always among its attributes.
func (a *acquireObs) waiting() {
	if a == nil || a.waited {
		return
	}
	a.waited = true
	if a.ob.tracer != nil {
		_, a.span = a.ob.tracer.Start(a.ctx, "latchkey.lock.wait", trace.WithTimestamp(a.start), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrKind.String(kindNames[a.kind]), attrLock.String(a.name)))
	}
}

// outcome classifies an acquire's result. A deadline that ends the wait
// is a timeout like TryLock's: both mean the caller's time ran out.
func outcome(ctx context.Context, err error) variant {
	switch {
	case err == nil:
		return outAcquired
	case errors.Is(err, errBusy), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return outTimeout
	case ctx.Err() != nil, errors.Is(err, ErrClosed):
		return outCancelled
	}
	return outError
}

// end records the acquire's outcome, and the acquisition when it succeeded.
func (a *acquireObs) end(ctx context.Context, err error) {
	if a == nil {
		return
	}
	if err == nil {
		a.ob.add(acquisitions, a.kind, a.name, 1, firstEntry)
	}
	a.endWait(ctx, err)
}

// endWait records the wait's outcome, its contention (it waited, or was
// refused as busy) and its span only: an
// Await ends with it, since it acquires nothing that a hold could follow.
func (a *acquireObs) endWait(ctx context.Context, err error) {
	if a == nil {
		return
	}
	out := outcome(ctx, err)
	ob := a.ob
	ob.wait.Record(context.Background(), time.Since(a.start).Seconds(), ob.attrs(a.kind, a.name, out))
	// A try refused without a wait (errBusy) found the lock busy as much as
	// a call that waited: the contention ratio (contended over the waits
	// recorded) would read a lock that refuses every TryLock as free.
	if a.waited || errors.Is(err, errBusy) {
		ob.add(contentions, a.kind, a.name, 1, plain)
	}
	if a.span != nil {
		a.span.SetAttributes(variantAttrs[out])
		if out == outError {
			a.span.SetStatus(codes.Error, err.Error())
		}
		a.span.End()
	}
}

// add counts n on c for the lock name of kind k, with v; nothing when ob
// is nil (metrics and traces off) or n is not positive.
func (ob *observer) add(c counter, k lockKind, name string, n int64, v variant) {
	if ob != nil && n > 0 {
		ob.counters[c].Add(context.Background(), n, ob.attrs(k, name, v))
	}
}

// ended records a hold's end: its duration, and its loss when cause is
// not nil.
func (ob *observer) ended(k lockKind, name string, granted time.Time, cause error) {
	if ob == nil {
		return
	}
	ob.hold.Record(context.Background(), time.Since(granted).Seconds(), ob.attrs(k, name, plain))
	if cause != nil {
		ob.add(losses, k, name, 1, lossCause(cause))
	}
}

// lossCause says why a hold was lost, for latchkey.lock.lost.
func lossCause(cause error) variant {
	var lease *leaseEndError
	switch {
	case errors.Is(cause, watchdog.ErrGone), errors.Is(cause, errFoundGone):
		return lostGone
	case errors.Is(cause, watchdog.ErrExpired):
		return lostRenewal
	case errors.As(cause, &lease):
		return lostLease
	}
	return lostOther
}

// subMeter is the meter the watchdog and the hub record on; nil when
// metrics are off.
func (ob *observer) subMeter() metric.Meter {
	if ob == nil {
		return nil
	}
	return ob.meter
}
