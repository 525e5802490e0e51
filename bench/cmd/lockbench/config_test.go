package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/locks"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-procs", "4", "-g", "8", "-cs", "1ms", "-libs", "redsync, latchkey", "-reps", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.procs != 4 || cfg.g != 8 || cfg.cs != time.Millisecond || cfg.reps != 2 || cfg.dur != DefaultDur || cfg.lease != DefaultLease {
		t.Errorf("parsed %+v", cfg)
	}
	if !slices.Equal(cfg.libs, []string{locks.Redsync, locks.Latchkey}) {
		t.Errorf("libs = %v, want [redsync latchkey] in the order given", cfg.libs)
	}
	sc := cfg.custom()
	if sc.Procs != 4 || sc.G != 8 || sc.Keys != 1 || sc.CSUS != 1000 {
		t.Errorf("custom scenario %+v", sc)
	}
	cfg, err = parseFlags(nil)
	if err != nil || !slices.Equal(cfg.libs, locks.All) {
		t.Errorf("defaults: libs %v, err %v; want every library", cfg.libs, err)
	}
	ms := time.Millisecond
	if !slices.Equal(cfg.sweep, []time.Duration{2 * ms, 8 * ms, 32 * ms, 128 * ms}) || cfg.reps != 5 || cfg.backoff != 0 {
		t.Errorf("defaults: sweep %v, reps %d, backoff %v", cfg.sweep, cfg.reps, cfg.backoff)
	}
	if !cfg.runs("f") || !cfg.runs("g") || !cfg.runs("watchdog") {
		t.Errorf("the suite's parts by default: %v, want all", cfg.parts)
	}
	if !slices.Equal(cfg.fleet, []int{4, 16, 64}) || cfg.fleetDur != DefaultFleetDur || cfg.fleetRamp != DefaultFleetRamp || cfg.fleetReps != DefaultFleetReps {
		t.Errorf("defaults: fleet %v over %v after %v, %d repetitions", cfg.fleet, cfg.fleetDur, cfg.fleetRamp, cfg.fleetReps)
	}
	cfg, err = parseFlags([]string{"-suite", "-scenarios", "c, f", "-sweep", "4ms,,1s,4ms", "-sweepdur", "1s", "-idledur", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.parts, []string{"c", "f"}) || cfg.runs("watchdog") || cfg.sweepDur != time.Second || cfg.idleDur != 3*time.Second {
		t.Errorf("parsed %+v", cfg)
	}
	if got := cfg.suiteScenarios(); len(got) != 1 || got[0].Name != "c" {
		t.Errorf("suite scenarios %v, want only c", got)
	}
	if !slices.Equal(cfg.sweep, []time.Duration{4 * ms, time.Second}) {
		t.Errorf("sweep %v, want [4ms 1s]", cfg.sweep)
	}
	// Fleet sizes in ascending order, without repeats.
	cfg, err = parseFlags([]string{"-suite", "-scenarios", "g", "-fleet", "32, 8,,32", "-fleetdur", "3s", "-fleetreps", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.fleet, []int{8, 32}) || cfg.fleetDur != 3*time.Second || cfg.fleetReps != 2 || len(cfg.suiteScenarios()) != 0 {
		t.Errorf("fleet %v over %v, %d repetitions, scenarios a-e %v; want [8 32] over 3s, 2, none", cfg.fleet, cfg.fleetDur, cfg.fleetReps, cfg.suiteScenarios())
	}
}

// TestRunsFor checks which runs a repetition has: the defaults, then, in
// the suite's contended scenarios, the sweep's other settings.
func TestRunsFor(t *testing.T) {
	cfg, err := parseFlags([]string{"-suite", "-sweep", "8ms,128ms", "-sweepdur", "1s", "-dur", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	names := func(runs []runSpec) []string {
		var s []string
		for _, r := range runs {
			s = append(s, fmt.Sprintf("%s %v", r, r.dur))
		}
		return s
	}
	defaults := []string{"latchkey 2s", "latchkey-spin 2s", "redsync 2s", "redislock 2s", "rueidislock 2s"}
	if got := names(cfg.runsFor(suite[1])); !slices.Equal(got, defaults) {
		t.Errorf("(b): %v, want the defaults only", got)
	}
	// 128ms is latchkey-spin's and redislock's default: not run twice.
	want := append(defaults, "latchkey-spin@8ms 1s", "redsync@8ms 1s", "redsync@128ms 1s", "redislock@8ms 1s")
	runs := cfg.runsFor(suite[3])
	if got := names(runs); !slices.Equal(got, want) {
		t.Errorf("(d):\n got %v\nwant %v", got, want)
	}
	for _, r := range runs {
		if r.isSweep(cfg) != (r.backoff != 0) {
			t.Errorf("%s: isSweep %v", r, r.isSweep(cfg))
		}
	}
	// Not the suite: -backoff for the polling libraries, no sweep.
	cfg, err = parseFlags([]string{"-backoff", "4ms", "-libs", "latchkey,redislock", "-dur", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	runs = cfg.runsFor(cfg.custom())
	if got := names(runs); !slices.Equal(got, []string{"latchkey 1s", "redislock@4ms 1s"}) || runs[1].isSweep(cfg) {
		t.Errorf("custom run with -backoff: %v", got)
	}
	if b := (runSpec{lib: locks.Redislock}).backoffMS(); b != 128 {
		t.Errorf("redislock's default backoff %vms, want 128", b)
	}
	idle := runSpec{lib: locks.Latchkey, dur: 30 * time.Second, idle: true}
	if idle.timeout(10*time.Second) <= idle.dur || (runSpec{}).timeout(10*time.Second) != 10*time.Second {
		t.Error("an idle run's acquires must be able to wait until its end; the others keep -timeout")
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-procs", "0"},
		{"-cs", "-1ms"},
		{"-dur", "0s"},
		{"-reps", "0"},
		{"-lease", "1ms", "-cs", "5ms"},
		{"-libs", "redsync,nosuchlock"},
		{"-libs", ","},
		{"-suite", "-watchdog"},
		{"-suite", "-backoff", "8ms"},
		{"-backoff", "-1ms"},
		{"-sweep", "8ms"}, // only with -suite
		{"-suite", "-sweep", "100us"},
		{"-suite", "-sweep", "fast"},
		{"-suite", "-scenarios", "a,h"},
		{"-fleet", "4,16"}, // only with -suite
		{"-suite", "-fleet", "0"},
		{"-suite", "-fleet", "four"},
		{"-suite", "-fleet", ","},
		{"-suite", "-fleetdur", "0s"},
		{"-suite", "-fleetramp", "-1s"},
		{"-suite", "-fleetreps", "0"},
		{"-suite", "-scenarios", ","},
		{"-suite", "-idledur", "0s"},
		{"stray"},
		{"-nosuchflag"},
	} {
		if _, err := parseFlags(args); !errors.Is(err, ErrUsage) {
			t.Errorf("parseFlags(%q): %v, want ErrUsage", args, err)
		}
	}
}

// TestSuiteRefusesHandoversEnv: the suite's results are published, and
// they would not record latchkey's MaxLocalHandovers changed by the
// variable; a run that is not -suite may use it.
func TestSuiteRefusesHandoversEnv(t *testing.T) {
	t.Setenv(locks.HandoversEnv, "0")
	_, err := parseFlags([]string{"-suite"})
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), locks.HandoversEnv) {
		t.Errorf("parseFlags(-suite) with %s set: %v, want ErrUsage naming it", locks.HandoversEnv, err)
	}
	if _, err := parseFlags([]string{"-procs", "2"}); err != nil {
		t.Errorf("parseFlags(-procs 2) with %s set: %v", locks.HandoversEnv, err)
	}
	t.Setenv(locks.HandoversEnv, "")
	if _, err := parseFlags([]string{"-suite"}); err != nil {
		t.Errorf("parseFlags(-suite) with %s empty: %v", locks.HandoversEnv, err)
	}
}

func TestGetRedisRefusesRemote(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:6379", "redis.example:6379", "nohostport"} {
		if _, _, _, err := benchredis.Get(t.Context(), addr); err == nil {
			t.Errorf("benchredis.Get(%q) accepted it", addr)
		}
	}
	if _, _, _, err := benchredis.Get(t.Context(), "10.0.0.1:6379"); !errors.Is(err, benchredis.ErrNotLoopback) {
		t.Errorf("benchredis.Get(10.0.0.1:6379): %v, want benchredis.ErrNotLoopback", err)
	}
}
