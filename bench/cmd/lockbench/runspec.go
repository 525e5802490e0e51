package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
)

// runSpec is one kind of run: a library at a retry setting, for a
// duration.
type runSpec struct {
	lib     string
	backoff time.Duration // locks.Options.Backoff; 0: the library's default
	dur     time.Duration
	// ramp runs before dur and is left out of the counts, CPU and
	// commands: the run measures a steady state, without the start's rush
	// (the fleet's). A wait that began in it counts whole, and violations
	// and errors in it count (hammer).
	ramp time.Duration
	// idle makes the run scenario (f)'s: the workers report their grants
	// and releases, Redis is read while the run lasts, and every acquire
	// may wait until the end of the run.
	idle bool
}

// backoffMS is the setting's value in ms, the default's included: 0 for
// no retry setting or a random delay.
func (r runSpec) backoffMS() float64 {
	return float64(cmp.Or(r.backoff, locks.DefaultBackoff(r.lib))) / float64(time.Millisecond)
}

// timeout is the per-acquire deadline of the run's workers: the configured
// one, or, for an idle run, one past the end of the run, so that no waiter
// gives up and comes back while Redis is watched.
func (r runSpec) timeout(configured time.Duration) time.Duration {
	if r.idle {
		return max(configured, r.dur+time.Second)
	}
	return configured
}

func (r runSpec) String() string {
	if r.backoff == 0 {
		return r.lib
	}
	return fmt.Sprintf("%s@%v", r.lib, r.backoff)
}

// sweepScenarios are the suite's contended scenarios, where the polling
// libraries also run at the sweep's retry settings.
var sweepScenarios = []string{"c", "d", "e"}

// runsFor lists the runs of one repetition of sc, in the order they run:
// every library at its default setting for -dur, then, in the sweep's
// scenarios of the suite, each polling library at each sweep setting other
// than its default for -sweepdur. A run that is not the suite has every
// polling library at -backoff.
func (c config) runsFor(sc results.Scenario) []runSpec {
	var runs []runSpec
	for _, lib := range c.libs {
		run := runSpec{lib: lib, dur: c.dur}
		if !c.suite && locks.Tunable(lib) {
			run.backoff = c.backoff
		}
		runs = append(runs, run)
	}
	if !c.suite || !slices.Contains(sweepScenarios, sc.Name) {
		return runs
	}
	for _, lib := range c.libs {
		if !locks.Tunable(lib) {
			continue
		}
		for _, b := range c.sweep {
			if b != locks.DefaultBackoff(lib) {
				runs = append(runs, runSpec{lib: lib, backoff: b, dur: c.sweepDur})
			}
		}
	}
	return runs
}

// isSweep tells whether run is a sweep point rather than a default.
func (r runSpec) isSweep(c config) bool { return c.suite && r.backoff != 0 }
