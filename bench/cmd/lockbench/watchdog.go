package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// The watchdog scale: one client holds WatchdogSteps locks in turn, without a
// lease, with a watchdog much faster than the default so that a few seconds
// show several ticks. The interval still leaves a tick room: at 100 000
// locks one took 0.3-0.45s on 2 cores, and 1s with two busy processes
// beside it.
var (
	WatchdogTimeout  = 6 * time.Second
	WatchdogInterval = 2 * time.Second
)

const (
	// WatchdogTicks is how many renewal ticks each step measures.
	WatchdogTicks = 3
	// watchdogLockers is how many goroutines take and release the locks:
	// enough that the client pipelines their calls (16 took 90 000 locks in
	// 2.7s, 64 in 1.5s; more gained nothing).
	watchdogLockers = 64
	// goroutineSamples readings of the goroutine count, goroutineGap apart,
	// make one count: their minimum.
	goroutineSamples = 10
	goroutineGap     = 20 * time.Millisecond
	// watchdogPoll is how often the tick count is read while waiting for
	// ticks: short against WatchdogInterval, so a window ends within 1% of
	// an interval after its last tick.
	watchdogPoll = 20 * time.Millisecond
)

// WatchdogSteps are the lock counts measured, in increasing order.
var WatchdogSteps = []int{1000, 10000, 100000}

// watchdogScale holds WatchdogSteps locks in one latchkey client and
// measures, per renewal tick, the script calls the watchdog makes (from its
// Stats and from Redis' commandstats), Redis' CPU and this process's CPU,
// and the process's goroutine count at each step.
func (b *bench) watchdogScale(ctx context.Context) (_ *results.Watchdog, err error) {
	fmt.Fprintf(b.progress, "watchdog scale: holding %v locks, renewed every %v\n", WatchdogSteps, WatchdogInterval)
	if err := benchredis.Flush(ctx, b.admin); err != nil {
		return nil, err
	}
	rc, err := benchredis.Connect(b.addr)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	c, err := rlock.NewClient(rc, rlock.Options{
		WatchdogTimeout: WatchdogTimeout, WatchdogInterval: WatchdogInterval, RenewBatchSize: watchdog.DefaultBatchSize,
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The idle count comes after locks taken and released concurrently, so
	// that it includes what the client starts on first concurrent use
	// (rueidis starts its pipelining goroutines then, and keeps them).
	warm, err := acquire(ctx, c, 0, 4*watchdogLockers)
	if err == nil {
		err = release(warm)
	}
	if err != nil {
		return nil, fmt.Errorf("warming up: %w", err)
	}
	w := &results.Watchdog{
		TimeoutMS: float64(WatchdogTimeout.Milliseconds()), IntervalMS: float64(WatchdogInterval.Milliseconds()),
		BatchSize: watchdog.DefaultBatchSize, GoroutinesIdle: steadyGoroutines(),
	}

	var held []held
	defer func() { err = errors.Join(err, release(held)) }()
	for _, n := range WatchdogSteps {
		start := time.Now()
		more, err := acquire(ctx, c, len(held), n)
		took := time.Since(start)
		held = append(held, more...)
		if err != nil {
			return nil, fmt.Errorf("taking %d locks: %w", n, err)
		}
		step, err := b.measureTicks(ctx, c, n)
		if err != nil {
			return nil, err
		}
		step.AcquireMS = float64(took.Microseconds()) / 1e3
		fmt.Fprintf(b.progress, "watchdog scale: %d locks (the last %d taken in %v): %.1f calls/tick, %.1f evalsha/tick, "+
			"%.0fµs Redis CPU/tick, %.0fµs client CPU/tick (%d GC cycles), %d goroutines\n",
			n, len(more), took.Round(time.Millisecond), step.CallsPerTick, step.EvalshaPerTick,
			step.RedisCPUUSPerTick, step.ClientCPUUSPerTick, step.GCCycles, step.Goroutines)
		w.Steps = append(w.Steps, step)
	}
	st := c.WatchdogStats()
	w.Lost, w.Errors = st.Lost, st.Errors
	return w, nil
}

// measureTicks waits for a tick to end, then measures over WatchdogTicks
// more. The goroutine count is taken while the locks are held and nothing
// else runs in the client.
func (b *bench) measureTicks(ctx context.Context, c *rlock.Client, locks int) (results.WatchdogStep, error) {
	step := results.WatchdogStep{Locks: locks, Goroutines: steadyGoroutines()}
	first, err := awaitTicks(ctx, c, c.WatchdogStats().Ticks+1, time.Now())
	if err != nil {
		return step, err
	}
	// The last tick ends about WatchdogTicks intervals after the first.
	lastDue := time.Now().Add(WatchdogTicks*WatchdogInterval - WatchdogInterval/4)
	win, err := benchredis.OpenWindow(ctx, b.admin)
	if err != nil {
		return step, err
	}
	client0, err := readUsage()
	if err != nil {
		return step, err
	}
	last, err := awaitTicks(ctx, c, first.Ticks+WatchdogTicks, lastDue)
	if err != nil {
		return step, err
	}
	client1, err := readUsage()
	if err != nil {
		return step, err
	}
	cpuSeconds, calls, err := win.Close(ctx)
	if err != nil {
		return step, err
	}
	ticks := float64(last.Ticks - first.Ticks)
	step.Ticks = last.Ticks - first.Ticks
	step.CallsPerTick = float64(last.Calls-first.Calls) / ticks
	step.RenewedPerTick = float64(last.Renewed-first.Renewed) / ticks
	step.EvalshaPerTick = float64(calls["evalsha"]+calls["eval"]) / ticks
	step.RedisCPUUSPerTick = cpuSeconds * 1e6 / ticks
	step.ClientCPUUSPerTick = float64((client1.cpu - client0.cpu).Microseconds()) / ticks
	step.ClientAllocKBPerTick = float64(client1.alloc-client0.alloc) / 1e3 / ticks
	step.GCCycles = client1.gcs - client0.gcs
	return step, nil
}

// usage is what this process has used so far.
type usage struct {
	// cpu is user and system CPU time, all threads together: the client's
	// goroutines, the Go runtime's (its garbage collector) and the
	// benchmark's own polling.
	cpu   time.Duration
	alloc uint64 // bytes allocated on the heap
	gcs   uint32 // garbage collection cycles completed
}

func readUsage() (usage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}, fmt.Errorf("getrusage: %w", err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), alloc: ms.TotalAlloc, gcs: ms.NumGC}, nil
}

// ErrNoTicks reports a watchdog that stopped ticking: its client is broken.
var ErrNoTicks = errors.New("the watchdog did not tick")

// awaitTicks waits until from, then polls the watchdog's stats until it has
// done n ticks. Each poll wakes this process, which would count in its CPU
// per tick: a measuring window polls only from shortly before its last tick.
func awaitTicks(ctx context.Context, c *rlock.Client, n uint64, from time.Time) (watchdog.Stats, error) {
	limit := time.Now().Add(time.Duration(n+2) * WatchdogInterval * 2)
	select {
	case <-ctx.Done():
		return c.WatchdogStats(), ctx.Err()
	case <-time.After(time.Until(from)):
	}
	t := time.NewTicker(watchdogPoll)
	defer t.Stop()
	for {
		st := c.WatchdogStats()
		if st.Ticks >= n {
			return st, nil
		}
		if time.Now().After(limit) {
			return st, fmt.Errorf("%w: %d ticks, waited for %d", ErrNoTicks, st.Ticks, n)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-t.C:
		}
	}
}

// held is one lock the watchdog scale holds.
type held struct {
	m    *rlock.Mutex
	lctx context.Context
}

// acquire takes locks from..to-1 with watchdogLockers goroutines, without a
// lease, and returns the ones it took.
func acquire(ctx context.Context, c *rlock.Client, from, to int) ([]held, error) {
	out := make([]held, to-from)
	errs := make([]error, watchdogLockers)
	var wg sync.WaitGroup
	for w := range watchdogLockers {
		wg.Go(func() {
			for i := from + w; i < to && errs[w] == nil; i += watchdogLockers {
				m := c.Mutex("lockbench:wd:" + strconv.Itoa(i))
				lctx, err := m.Lock(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				out[i-from] = held{m: m, lctx: lctx}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// Keep what was taken so that the caller releases it.
		taken := out[:0]
		for _, h := range out {
			if h.m != nil {
				taken = append(taken, h)
			}
		}
		return taken, err
	}
	return out, nil
}

// release unlocks every held lock with watchdogLockers goroutines.
func release(hs []held) error {
	errs := make([]error, watchdogLockers)
	var wg sync.WaitGroup
	for w := range watchdogLockers {
		wg.Go(func() {
			for i := w; i < len(hs); i += watchdogLockers {
				errs[w] = errors.Join(errs[w], hs[i].m.Unlock(hs[i].lctx))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// steadyGoroutines is the process's goroutine count without the short-lived
// ones: the least of goroutineSamples readings. Goroutines that come and go
// (a context.AfterFunc callback, a connection's helper) would make single
// readings differ by one or two; a goroutine per held lock persists and
// would show in every reading.
func steadyGoroutines() int {
	n := runtime.NumGoroutine()
	for range goroutineSamples - 1 {
		time.Sleep(goroutineGap)
		n = min(n, runtime.NumGoroutine())
	}
	return n
}
