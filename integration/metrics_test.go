package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// metricsReader reads what a client recorded, with the OTel SDK's manual
// reader.
type metricsReader struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
}

func (r metricsReader) collect() metricdata.ResourceMetrics {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(r.t, r.reader.Collect(context.Background(), &rm))
	return rm
}

// point is one data point: its attributes, and its count (histograms) or
// value (sums and gauges).
type point struct {
	attrs attribute.Set
	n     int64
}

// points are the data points of the metric name, or of every metric when
// name is "".
func (r metricsReader) points(name string) []point {
	r.t.Helper()
	var ps []point
	for _, sm := range r.collect().ScopeMetrics {
		for _, m := range sm.Metrics {
			if name != "" && m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{p.Attributes, int64(p.Count)})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{p.Attributes, int64(p.Count)})
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{p.Attributes, p.Value})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{p.Attributes, p.Value})
				}
			default:
				r.t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return ps
}

// value sums name's points whose attributes include want.
func (r metricsReader) value(name string, want ...attribute.KeyValue) int64 {
	r.t.Helper()
	var total int64
points:
	for _, p := range r.points(name) {
		for _, kv := range want {
			if v, ok := p.attrs.Value(kv.Key); !ok || v != kv.Value {
				continue points
			}
		}
		total += p.n
	}
	return total
}

// withKey counts the points, of every metric, that have the attribute key.
func (r metricsReader) withKey(key attribute.Key) int {
	r.t.Helper()
	n := 0
	for _, p := range r.points("") {
		if p.attrs.HasValue(key) {
			n++
		}
	}
	return n
}

// observe returns a reader of metrics and a recorder of spans, and what
// sets their providers in a client's options; both end with t.
func observe(t *testing.T) (metricsReader, *tracetest.SpanRecorder, func(rlock.Options) rlock.Options) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	spans := tracetest.NewSpanRecorder()
	trp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = trp.Shutdown(context.Background()) })
	return metricsReader{t: t, reader: reader}, spans, func(o rlock.Options) rlock.Options {
		o.MeterProvider, o.TracerProvider = mp, trp
		return o
	}
}

// TestMetricsAndTraces: the instruments record what happened, read back
// with the SDK's in-memory reader, and a wait is a span with its outcome.
func TestMetricsAndTraces(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, spans, observed := observe(t)
		att := newAttempts()
		c := lockClient(t, tp, att.options(observed(rlock.Options{WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond})))
		// other, the holder c contends with, records apart: what c records
		// is c's alone.
		ro, _, observedOther := observe(t)
		other := lockClient(t, tp, observedOther(rlock.Options{}))
		name := lockName(t)
		kind := attribute.String("latchkey.kind", "mutex")
		outcome := func(o string) attribute.KeyValue { return attribute.String("latchkey.outcome", o) }

		// Busy: a TryLock without wait times out at once; it found the lock
		// busy, so it counts as contended, and makes no span.
		held, err := other.Mutex(name).Lock(ctx)
		require.NoError(t, err)
		_, ok, err := c.Mutex(name).TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		assert.EqualValues(t, 1, r.value("latchkey.lock.wait.duration", kind, outcome("timeout")))
		assert.EqualValues(t, 1, r.value("latchkey.lock.contended", kind))

		// Contended: a Lock waits, on one subscription, for the release.
		var wg sync.WaitGroup
		var lctx context.Context
		blockWaiters(t, att, name, 1, &wg, func() {
			var err error
			lctx, err = c.Mutex(name).Lock(ctx)
			assert.NoError(t, err)
		})
		assert.EqualValues(t, 1, r.value("latchkey.notify.subscriptions"), "the waiter's subscription")
		require.NoError(t, other.Mutex(name).Unlock(held))
		wg.Wait()
		require.NotNil(t, lctx)
		assert.EqualValues(t, 1, r.value("latchkey.lock.wait.duration", kind, outcome("acquired")))
		assert.EqualValues(t, 2, r.value("latchkey.lock.contended", kind))
		assert.EqualValues(t, 1, r.value("latchkey.lock.acquisitions", kind, attribute.Bool("latchkey.reentry", false)))
		assert.GreaterOrEqual(t, r.value("latchkey.notify.wakeups.received", attribute.String("latchkey.wakeup", "one")), int64(1))
		ended := spans.Ended()
		require.Len(t, ended, 1, "one span: the one wait")
		assert.Equal(t, "latchkey.lock.wait", ended[0].Name())
		assert.Contains(t, ended[0].Attributes(), outcome("acquired"))

		// A re-entry, and renewals.
		rctx, err := c.Mutex(name).Lock(lctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, r.value("latchkey.lock.acquisitions", kind, attribute.Bool("latchkey.reentry", true)))
		renewed := c.WatchdogStats().Renewed
		awaitCond(t, 10*time.Second, "two renewals", func() bool { return c.WatchdogStats().Renewed >= renewed+2 })
		assert.GreaterOrEqual(t, r.value("latchkey.watchdog.renewals"), int64(renewed+2))
		assert.GreaterOrEqual(t, r.value("latchkey.watchdog.batch.size"), int64(2))
		assert.EqualValues(t, 1, r.value("latchkey.watchdog.leases"))

		// Lost: force-unlocked under the holder.
		ok, err = other.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		requireLost(t, rctx, 10*time.Second, "the force-unlocked hold")
		assert.EqualValues(t, 1, ro.value("latchkey.lock.force_unlocks", kind), "counted by the client that forced")
		assert.Zero(t, r.value("latchkey.lock.force_unlocks"))
		assert.EqualValues(t, 1, r.value("latchkey.lock.lost", kind, attribute.String("latchkey.cause", "gone")), "the holder sees its lock gone")
		assert.EqualValues(t, 1, r.value("latchkey.lock.hold.duration", kind))
		require.ErrorIs(t, c.Mutex(name).Unlock(lctx), rlock.ErrNotHeld)

		// Cancelled: a wait whose context ends.
		held, err = other.Mutex(name).Lock(ctx)
		require.NoError(t, err)
		wctx, stop := context.WithCancel(ctx)
		blockWaiters(t, att, name, 1, &wg, func() {
			_, err := c.Mutex(name).Lock(wctx)
			assert.ErrorIs(t, err, context.Canceled)
		})
		stop()
		wg.Wait()
		assert.EqualValues(t, 1, r.value("latchkey.lock.wait.duration", kind, outcome("cancelled")))
		assert.EqualValues(t, 3, r.value("latchkey.lock.contended", kind))

		// Timed out: a wait whose context's deadline passes, like a TryLock's.
		dctx := newDeadlineCtx(ctx)
		blockWaiters(t, att, name, 1, &wg, func() {
			_, err := c.Mutex(name).Lock(dctx)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
		dctx.expire()
		wg.Wait()
		assert.EqualValues(t, 2, r.value("latchkey.lock.wait.duration", kind, outcome("timeout")))
		assert.EqualValues(t, 4, r.value("latchkey.lock.contended", kind))
		ended = spans.Ended()
		require.Len(t, ended, 3, "a span per wait")
		assert.Contains(t, ended[1].Attributes(), outcome("cancelled"))
		assert.Contains(t, ended[2].Attributes(), outcome("timeout"))
		require.NoError(t, other.Mutex(name).Unlock(held))

		// A release that wakes a queued client of another process.
		assert.Zero(t, r.value("latchkey.lock.wakeups.sent", kind))
		mine, err := c.Mutex(name).Lock(ctx)
		require.NoError(t, err)
		watt := newAttempts()
		waiter := lockClient(t, tp, watt.options(rlock.Options{}))
		blockWaiters(t, watt, name, 1, &wg, func() {
			wctx, err := waiter.Mutex(name).Lock(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, waiter.Mutex(name).Unlock(wctx))
			}
		})
		require.NoError(t, c.Mutex(name).Unlock(mine))
		wg.Wait()
		assert.EqualValues(t, 1, r.value("latchkey.lock.wakeups.sent", kind))
		assert.Zero(t, r.withKey("latchkey.lock"), "the lock name is no metric attribute unless asked for")
		requireNoLeftovers(t, tp, name)
	})
}

// TestMetricsLockName: with Options.MetricsLockName each lock's
// measurements carry its name.
func TestMetricsLockName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, _, observed := observe(t)
	c := lockClient(t, topologies()[0], observed(rlock.Options{MetricsLockName: true}))
	a, b := lockName(t)+"-a", lockName(t)+"-b"
	for _, name := range []string{a, b, b} {
		lctx, err := c.Mutex(name).Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Mutex(name).Unlock(lctx))
	}
	lock := attribute.Key("latchkey.lock")
	assert.EqualValues(t, 1, r.value("latchkey.lock.acquisitions", lock.String(a)))
	assert.EqualValues(t, 2, r.value("latchkey.lock.acquisitions", lock.String(b)))
	assert.EqualValues(t, 2, r.value("latchkey.lock.hold.duration", lock.String(b), attribute.String("latchkey.kind", "mutex")))
}

// TestMetricsFamily: RWMutex and Semaphore waits, holds, re-entries and
// contention are recorded under their own latchkey.kind.
func TestMetricsFamily(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, spans, observed := observe(t)
		att := newAttempts()
		c := lockClient(t, tp, att.options(observed(rlock.Options{})))
		other := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		kind := func(k string) attribute.KeyValue { return attribute.String("latchkey.kind", k) }
		reentry := func(b bool) attribute.KeyValue { return attribute.Bool("latchkey.reentry", b) }

		rw := c.RWMutex(name)
		rctx, err := rw.RLock(ctx)
		require.NoError(t, err)
		rrctx, err := rw.RLock(rctx) // a re-entry
		require.NoError(t, err)
		require.NoError(t, rw.RUnlock(rrctx))
		require.NoError(t, rw.RUnlock(rctx))
		assert.EqualValues(t, 1, r.value("latchkey.lock.acquisitions", kind("rwmutex_read"), reentry(false)))
		assert.EqualValues(t, 1, r.value("latchkey.lock.acquisitions", kind("rwmutex_read"), reentry(true)))
		assert.EqualValues(t, 1, r.value("latchkey.lock.hold.duration", kind("rwmutex_read")))

		// A writer waits for another client's reader.
		held, err := other.RWMutex(name).RLock(ctx)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var wctx context.Context
		blockWaiters(t, att, name, 1, &wg, func() {
			var err error
			wctx, err = rw.Lock(ctx)
			assert.NoError(t, err)
		})
		require.NoError(t, other.RWMutex(name).RUnlock(held))
		wg.Wait()
		require.NoError(t, rw.Unlock(wctx))
		assert.EqualValues(t, 1, r.value("latchkey.lock.contended", kind("rwmutex_write")))
		assert.EqualValues(t, 1, r.value("latchkey.lock.wait.duration", kind("rwmutex_write"), attribute.String("latchkey.outcome", "acquired")))
		require.Len(t, spans.Ended(), 1)

		sem := c.Semaphore(name+"-sem", 2)
		pctx, err := sem.Acquire(ctx, 2)
		require.NoError(t, err)
		_, ok, err := sem.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, sem.Release(pctx))
		assert.EqualValues(t, 1, r.value("latchkey.lock.acquisitions", kind("semaphore")))
		assert.EqualValues(t, 1, r.value("latchkey.lock.wait.duration", kind("semaphore"), attribute.String("latchkey.outcome", "timeout")))
		assert.EqualValues(t, 1, r.value("latchkey.lock.hold.duration", kind("semaphore")))
		requireNoLeftovers(t, tp, name, name+"-sem")
	})
}

// TestMetricsFamilyWakeups: an RWMutex's and a Semaphore's releases count
// every client they wake: a write release wakes each client with readers
// queued before the next writer, the last read release one writer, a
// Semaphore release as many clients as the freed permits serve.
func TestMetricsFamilyWakeups(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, _, observed := observe(t)
		c := lockClient(t, tp, observed(rlock.Options{}))
		name := lockName(t)
		kind := func(k string) attribute.KeyValue { return attribute.String("latchkey.kind", k) }
		// queue starts one acquire in each of n fresh clients, waits until
		// all n are queued, and returns a channel that yields each release
		// error once its acquire is in and released.
		queue := func(inspect func(context.Context, string) (rlock.LockInfo, error), name string, n int,
			acquire func(*rlock.Client) (release func() error, err error)) <-chan error {
			done := make(chan error, n)
			for range n {
				w := lockClient(t, tp, rlock.Options{})
				go func() {
					release, err := acquire(w)
					if err == nil {
						err = release()
					}
					done <- err
				}()
			}
			awaitWaiters(t, inspect, name, n)
			return done
		}
		drain := func(ch <-chan error, n int) {
			for range n {
				require.NoError(t, recvErr(t, ch, 10*time.Second, "a woken client"))
			}
		}

		wctx, err := c.RWMutex(name).Lock(ctx)
		require.NoError(t, err)
		readers := queue(c.InspectRWMutex, name, 2, func(w *rlock.Client) (func() error, error) {
			rctx, err := w.RWMutex(name).RLock(ctx)
			return func() error { return w.RWMutex(name).RUnlock(rctx) }, err
		})
		require.NoError(t, c.RWMutex(name).Unlock(wctx))
		drain(readers, 2)
		assert.EqualValues(t, 2, r.value("latchkey.lock.wakeups.sent", kind("rwmutex_write")), "one message to each reader's client")

		rctx, err := c.RWMutex(name).RLock(ctx)
		require.NoError(t, err)
		writer := queue(c.InspectRWMutex, name, 1, func(w *rlock.Client) (func() error, error) {
			lctx, err := w.RWMutex(name).Lock(ctx)
			return func() error { return w.RWMutex(name).Unlock(lctx) }, err
		})
		require.NoError(t, c.RWMutex(name).RUnlock(rctx))
		drain(writer, 1)
		assert.EqualValues(t, 1, r.value("latchkey.lock.wakeups.sent", kind("rwmutex_read")))

		sname := name + "-sem"
		pctx, err := c.Semaphore(sname, 2).Acquire(ctx, 2)
		require.NoError(t, err)
		permits := queue(c.InspectSemaphore, sname, 2, func(w *rlock.Client) (func() error, error) {
			p, err := w.Semaphore(sname, 2).Acquire(ctx, 1)
			return func() error { return w.Semaphore(sname, 2).Release(p) }, err
		})
		require.NoError(t, c.Semaphore(sname, 2).Release(pctx))
		drain(permits, 2)
		assert.EqualValues(t, 2, r.value("latchkey.lock.wakeups.sent", kind("semaphore")), "two permits freed serve two clients")
		requireNoLeftovers(t, tp, name, sname)
	})
}

// TestMetricsLatch: a CountDownLatch's Await records its wait under kind
// countdown_latch, contended only when it slept, as a span when it slept,
// and never as an acquisition or a hold; the CountDown that reaches zero
// counts a wake-up sent only when a client was subscribed to hear it.
func TestMetricsLatch(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, spans, observed := observe(t)
		att := newAttempts()
		c := lockClient(t, tp, att.options(observed(rlock.Options{})))
		name := lockName(t)
		l := c.CountDownLatch(name)
		// other counts down from another process and records apart.
		other := lockClient(t, tp, rlock.Options{}).CountDownLatch(name)
		kind := attribute.String("latchkey.kind", "countdown_latch")
		outcome := func(o string) attribute.KeyValue { return attribute.String("latchkey.outcome", o) }
		const wait = "latchkey.lock.wait.duration"

		// A zero that nobody hears wakes nobody.
		setCount(t, ctx, l, 1)
		require.NoError(t, l.CountDown(ctx))
		assert.Zero(t, r.value("latchkey.lock.wakeups.sent"))

		// Open: the Await returns at once, uncontended, and makes no span.
		require.NoError(t, l.Await(ctx))
		assert.EqualValues(t, 1, r.value(wait, kind, outcome("acquired")))
		assert.Zero(t, r.value("latchkey.lock.contended"))
		assert.Empty(t, spans.Ended())

		// As Lock, a context ended before the call is refused before any
		// I/O, and that is no wait.
		expired, stop := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer stop()
		require.ErrorIs(t, l.Await(expired), context.DeadlineExceeded)
		assert.EqualValues(t, 1, r.value(wait))

		// Contended: an Await sleeps through two CountDowns; the last, by
		// c, reaches c's own subscription.
		setCount(t, ctx, l, 2)
		results := startAwaiters(t, ctx, att, []*rlock.CountDownLatch{l}, 1, nil)
		require.NoError(t, other.CountDown(ctx))
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, collect(t, results, 1, 20*time.Second, "the zero")[0].err)
		assert.EqualValues(t, 2, r.value(wait, kind, outcome("acquired")))
		assert.EqualValues(t, 1, r.value("latchkey.lock.contended", kind))
		assert.EqualValues(t, 1, r.value("latchkey.lock.wakeups.sent", kind))
		ended := spans.Ended()
		require.Len(t, ended, 1, "one span: the one wait")
		assert.Equal(t, "latchkey.lock.wait", ended[0].Name())
		assert.Subset(t, ended[0].Attributes(), []attribute.KeyValue{kind, attribute.String("latchkey.lock", name), outcome("acquired")})

		// Timed out: the context's deadline passes while the Await sleeps.
		setCount(t, ctx, l, 1)
		dctx := newDeadlineCtx(ctx)
		results = startAwaiters(t, dctx, att, []*rlock.CountDownLatch{l}, 1, nil)
		dctx.expire()
		require.ErrorIs(t, collect(t, results, 1, 20*time.Second, "the deadline")[0].err, context.DeadlineExceeded)
		assert.EqualValues(t, 1, r.value(wait, kind, outcome("timeout")))
		assert.EqualValues(t, 2, r.value("latchkey.lock.contended", kind))
		ended = spans.Ended()
		require.Len(t, ended, 2, "a span per wait")
		assert.Contains(t, ended[1].Attributes(), outcome("timeout"))

		// Nothing is held: no acquisition, no hold, no lease.
		assert.Zero(t, r.value("latchkey.lock.acquisitions"))
		assert.Zero(t, r.value("latchkey.lock.hold.duration"))
		assert.Zero(t, r.value("latchkey.watchdog.leases"))
		assert.EqualValues(t, 3, r.value(wait), "the three Awaits that got past their checks")
		assert.Zero(t, r.withKey("latchkey.lock"), "the latch name is no metric attribute unless asked for")

		require.NoError(t, other.CountDown(ctx))
		requireNoLeftovers(t, tp, name)
	})
}

// deadlineCtx is a context whose deadline passes when the test calls
// expire, rather than at some instant a loaded machine may reach first.
type deadlineCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx(parent context.Context) *deadlineCtx {
	return &deadlineCtx{Context: parent, done: make(chan struct{})}
}

func (d *deadlineCtx) expire() { d.once.Do(func() { close(d.done) }) }

func (d *deadlineCtx) Done() <-chan struct{} { return d.done }

func (d *deadlineCtx) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestMetricsRenewalFailed: with Redis gone under a held lock, each renew
// call fails and is counted, and when the lease runs out locally the hold
// is lost with cause renewal_failed.
func TestMetricsRenewalFailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, tp := privateRedis(t)
	r, _, observed := observe(t)
	c := lockClient(t, tp, observed(rlock.Options{WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond}))
	lctx, err := c.Mutex(lockName(t)).Lock(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, r.value("latchkey.watchdog.leases"))
	require.NoError(t, srv.Close())
	requireLost(t, lctx, 10*time.Second, "the hold whose renewals fail")
	require.ErrorIs(t, context.Cause(lctx), watchdog.ErrExpired)
	assert.GreaterOrEqual(t, r.value("latchkey.watchdog.renewal.failures"), int64(1))
	assert.EqualValues(t, 1, r.value("latchkey.lock.lost", attribute.String("latchkey.cause", "renewal_failed")))
	assert.Zero(t, r.value("latchkey.watchdog.leases"))
}
