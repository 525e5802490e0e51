package main

import (
	"testing"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// TestWatchdogTargets: the calls target is judged at 100 000 locks, the
// goroutine target only when 1 000, 10 000 and 100 000 were all measured.
func TestWatchdogTargets(t *testing.T) {
	step := func(locks int, calls float64, goroutines int) results.WatchdogStep {
		return results.WatchdogStep{Locks: locks, CallsPerTick: calls, EvalshaPerTick: calls, Goroutines: goroutines}
	}
	full := []results.WatchdogStep{step(1000, 10, 10), step(10000, 100, 10), step(100000, 1000, 10)}
	for _, tc := range []struct {
		name       string
		w          *results.Watchdog
		calls, gor status
		achieved   [2]string
	}{
		{"NotRun", nil, notMeasured, notMeasured, [2]string{}},
		{"Without100000", &results.Watchdog{GoroutinesIdle: 10, Steps: full[:2]}, notMeasured, notMeasured, [2]string{}},
		{"Met", &results.Watchdog{GoroutinesIdle: 10, Steps: full}, met, met, [2]string{
			"1000 calls/tick (1000 EVALSHA/tick in Redis' commandstats), pipelined",
			"10 goroutines idle, then at 1000 → 10, 10000 → 10, 100000 → 10 locks",
		}},
		{"Missed", &results.Watchdog{GoroutinesIdle: 10, Steps: []results.WatchdogStep{step(1000, 10, 10), step(10000, 100, 10), step(100000, 1001, 12)}}, missed, missed, [2]string{
			"1001 calls/tick (1001 EVALSHA/tick in Redis' commandstats), pipelined",
			"10 goroutines idle, then at 1000 → 10, 10000 → 10, 100000 → 12 locks",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := watchdogTargets(tc.w)
			if len(ts) != 2 {
				t.Fatalf("%d targets, want 2", len(ts))
			}
			wantWhat := [2]string{"watchdog: ≤ 1 000 renew calls per tick for 100 000 locks", "watchdog: goroutine count constant, not proportional to locks held"}
			for i, want := range []status{tc.calls, tc.gor} {
				if ts[i].what != wantWhat[i] || ts[i].status != want || ts[i].achieved != tc.achieved[i] {
					t.Errorf("target %d: %+v, want %q, %s, %q", i, ts[i], wantWhat[i], want, tc.achieved[i])
				}
			}
		})
	}
}

func TestClientCPUCell(t *testing.T) {
	for _, tc := range []struct {
		step results.WatchdogStep
		want string
	}{
		{results.WatchdogStep{}, "–"}, // a file from before it was measured
		{results.WatchdogStep{ClientCPUUSPerTick: 850}, "850µs"},
		{results.WatchdogStep{ClientCPUUSPerTick: 93500, GCCycles: 2}, "93.5ms (2 GC cycles)"},
	} {
		if got := clientCPU(tc.step); got != tc.want {
			t.Errorf("clientCPU(%+v) = %q, want %q", tc.step, got, tc.want)
		}
	}
}

func TestSpaced(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1 000", 100000: "100 000", 1234567: "1 234 567"} {
		if got := spaced(n); got != want {
			t.Errorf("spaced(%d) = %q, want %q", n, got, want)
		}
	}
}
