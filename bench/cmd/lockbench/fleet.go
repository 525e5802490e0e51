package main

import (
	"context"
	"strconv"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/redisinfo"
)

// Scenario (g), a fleet: one lock, many processes of one goroutine each.
// Each waiter is then a Redis client of its own, which is where a lock
// that subscribes per waiting client pays most, and a poller's tries add
// up the fastest.
const (
	fleetName = "g"
	// fleetCS is the critical section: long enough that the lock, not the
	// clients, sets the pace, so throughput reads as a share of 1/cs.
	fleetCS = 5 * time.Millisecond
)

// fleetScenario is (g) at one fleet size.
func fleetScenario(procs int) results.Scenario {
	return results.Scenario{Name: fleetName, Label: "fleet, one goroutine per process", Procs: procs, G: 1, Keys: 1, CSUS: usOf(fleetCS)}
}

// fleet runs (g) at every size of cfg.fleet, smallest first, cfg.fleetReps
// times: within a repetition every library at its default setting,
// interleaved in repeat's rotated order.
func (b *bench) fleet(ctx context.Context) (*results.Fleet, error) {
	out := &results.Fleet{Reps: b.cfg.fleetReps, DurS: b.cfg.fleetDur.Seconds(), RampS: b.cfg.fleetRamp.Seconds()}
	runs := make([]runSpec, len(b.cfg.libs))
	for i, lib := range b.cfg.libs {
		runs[i] = runSpec{lib: lib, dur: b.cfg.fleetDur, ramp: b.cfg.fleetRamp}
	}
	for _, n := range b.cfg.fleet {
		sc := fleetScenario(n)
		out.Scenarios = append(out.Scenarios, sc)
		samples, err := b.repeat(ctx, fleetTag(sc), sc, runs, b.cfg.fleetReps)
		if err != nil {
			return nil, err
		}
		for i, run := range runs {
			out.Results = append(out.Results, summarizeFleet(run, sc, samples[i]))
		}
	}
	return out, nil
}

// fleetTag names one size of the fleet in progress lines and errors, "g64".
func fleetTag(sc results.Scenario) string { return sc.Name + strconv.Itoa(sc.Procs) }

// summarizeFleet is summarize with (g)'s own figures: tries, and
// subscriptions joined and left, per acquisition.
func summarizeFleet(run runSpec, sc results.Scenario, reps []*sample) results.FleetResult {
	calls := func(names []string) func(s *sample) float64 {
		return func(s *sample) float64 { return float64(redisinfo.Sum(s.calls, names)) }
	}
	r := results.FleetResult{
		Result:             summarize(run, sc, reps),
		SubscribesPerAcq:   results.SpreadOver(reps, perAcq(calls(redisinfo.SubscribeCommands))),
		UnsubscribesPerAcq: results.SpreadOver(reps, perAcq(calls(redisinfo.UnsubscribeCommands))),
	}
	if locks.CountsAttempts(run.lib) {
		sp := results.SpreadOver(reps, perAcq(func(s *sample) float64 { return float64(s.attempts) }))
		r.AttemptsPerAcq = &sp
	}
	return r
}
