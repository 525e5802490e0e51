package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// TestWatchdogScale runs the watchdog scale with small steps and a faster
// watchdog: the watchdog must renew every lock each tick in ceil(locks/100)
// calls, lose none, and keep the goroutine count of the idle client.
func TestWatchdogScale(t *testing.T) {
	defer func(steps []int, timeout, interval time.Duration) {
		WatchdogSteps, WatchdogTimeout, WatchdogInterval = steps, timeout, interval
	}(WatchdogSteps, WatchdogTimeout, WatchdogInterval)
	WatchdogSteps, WatchdogTimeout, WatchdogInterval = []int{50, 250}, 1500*time.Millisecond, 500*time.Millisecond
	cfg, err := parseFlags([]string{"-watchdog", "-json"})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, progress bytes.Buffer
	if err := execute(t.Context(), cfg, &stdout, &progress); err != nil {
		t.Fatalf("execute: %v\nprogress:\n%s", err, progress.String())
	}
	var w struct {
		Scenario string `json:"scenario"`
		results.Watchdog
	}
	line := bytes.TrimSpace(stdout.Bytes())
	if err := json.Unmarshal(line, &w); err != nil {
		t.Fatalf("bad JSON %s: %v", line, err)
	}
	if w.Scenario != "watchdog" || len(w.Steps) != 2 || w.Lost != 0 || w.Errors != 0 {
		t.Fatalf("watchdog result %+v", w)
	}
	for i, want := range []struct {
		locks int
		calls float64
	}{{50, 1}, {250, 3}} {
		s := w.Steps[i]
		if s.Locks != want.locks || s.Ticks != WatchdogTicks || s.CallsPerTick != want.calls || s.EvalshaPerTick != want.calls {
			t.Errorf("step %d: %+v, want %d locks, %d ticks, %v calls and EVALSHA per tick", i, s, want.locks, WatchdogTicks, want.calls)
		}
		if s.RenewedPerTick != float64(want.locks) {
			t.Errorf("step %d: %v renewed per tick, want %d", i, s.RenewedPerTick, want.locks)
		}
		if !(s.RedisCPUUSPerTick > 0 && s.ClientCPUUSPerTick > 0 && s.AcquireMS > 0) {
			t.Errorf("step %d: Redis CPU %vµs, client CPU %vµs per tick, taken in %vms: want all positive", i, s.RedisCPUUSPerTick, s.ClientCPUUSPerTick, s.AcquireMS)
		}
		if s.Goroutines != w.GoroutinesIdle {
			t.Errorf("step %d: %d goroutines holding %d locks, %d idle", i, s.Goroutines, s.Locks, w.GoroutinesIdle)
		}
	}
}
