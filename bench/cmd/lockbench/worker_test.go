package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
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
	hammer(t.Context(), blockedLocker{}, p, end, &inside, &tl)
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
