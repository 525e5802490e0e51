package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
)

// blockedLocker never grants: Lock waits for its context.
type blockedLocker struct{}

func (blockedLocker) Lock(ctx context.Context) (func() error, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHammerCountsWaitersAtTheEnd checks that an acquire still waiting when
// the run ends leaves a wait sample (its wait so far) but no acquisition:
// a starved waiter must show in the tail, not vanish from it.
func TestHammerCountsWaitersAtTheEnd(t *testing.T) {
	p := workerParams{Timeout: time.Minute}
	var inside atomic.Int32
	var tl tally
	start := time.Now()
	end := start.Add(50 * time.Millisecond)
	hammer(t.Context(), blockedLocker{}, p, start, end, &inside, &tl)
	if tl.acquired != 0 || tl.Timeouts != 0 || tl.Errors != 0 {
		t.Fatalf("acquired %d, timeouts %d, errors %d; want all 0", tl.acquired, tl.Timeouts, tl.Errors)
	}
	if n := tl.waits.Count(); n != 1 {
		t.Fatalf("%d wait samples, want 1 for the acquire cut off by the end", n)
	}
	if w, most := tl.waits.Max(), end.Sub(start); w > most || w < most-10*time.Millisecond {
		t.Errorf("censored wait %v, want about the run's %v", w, most)
	}
}

// flakyLib's lockers lose their first try the way rueidislock can under
// load, waiting for a wake-up that never comes, then grant; or, with err
// set, fail at once with it.
type flakyLib struct {
	tries atomic.Int32
	err   error
}

func (l *flakyLib) Locker(string) locks.Locker { return l }
func (l *flakyLib) Close() error               { return nil }

func (l *flakyLib) Lock(ctx context.Context) (func() error, error) {
	switch {
	case l.err != nil:
		l.tries.Add(1)
		return nil, l.err
	case l.tries.Add(1) == 1:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return func() error { return nil }, nil
}

// TestWarmUpRetries: a warm-up Lock that waits past warmTry is tried again
// and the warm-up succeeds; any other error ends it at once.
func TestWarmUpRetries(t *testing.T) {
	defer func(d time.Duration) { warmTry = d }(warmTry)
	warmTry = 20 * time.Millisecond
	lost := &flakyLib{}
	if err := warmUp(lost, workerParams{G: 1}); err != nil || lost.tries.Load() != 2 {
		t.Errorf("warm-up after a lost try: %v after %d tries, want success after 2", err, lost.tries.Load())
	}
	broken := &flakyLib{err: errors.New("refused")}
	if err := warmUp(broken, workerParams{G: 1}); err == nil || broken.tries.Load() != 1 {
		t.Errorf("warm-up with a failing library: %v after %d tries, want its error after 1", err, broken.tries.Load())
	}
}

// scriptedLocker grants at once, then once at second, then blocks.
type scriptedLocker struct {
	second time.Time
	calls  int
}

func (l *scriptedLocker) Lock(ctx context.Context) (func() error, error) {
	l.calls++
	switch l.calls {
	case 1:
	case 2:
		time.Sleep(time.Until(l.second))
	default:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return func() error { return nil }, nil
}

// TestHammerLeavesOutTheRamp checks that a grant before from (the ramp's
// end) is no acquisition and leaves no wait sample, while one after it
// counts with its whole wait.
func TestHammerLeavesOutTheRamp(t *testing.T) {
	p := workerParams{Timeout: time.Minute}
	var inside atomic.Int32
	var tl tally
	start := time.Now()
	from := start.Add(40 * time.Millisecond)
	end := from.Add(60 * time.Millisecond)
	l := &scriptedLocker{second: from.Add(10 * time.Millisecond)}
	hammer(t.Context(), l, p, from, end, &inside, &tl)
	if tl.acquired != 1 {
		t.Fatalf("acquired %d, want 1: the grant in the ramp left out", tl.acquired)
	}
	if n := tl.waits.Count(); n != 2 {
		t.Fatalf("%d wait samples, want 2: the grant after the ramp and the acquire cut off by the end", n)
	}
	if w := tl.waits.Max(); w < from.Sub(start) {
		t.Errorf("longest wait %v: the wait that began in the ramp should count whole", w)
	}
}
