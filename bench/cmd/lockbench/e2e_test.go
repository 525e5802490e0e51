package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/redisinfo"
)

// TestEndToEnd runs every library briefly on scenario a's shape, with
// lockbench starting its own redis-server and re-executing this test binary
// as its worker.
func TestEndToEnd(t *testing.T) {
	stdout, f := executeArgs(t, "-dur", "300ms", "-reps", "1", "-name", "a", "-json")
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Bytes()
		if keys := jsonKeys(t, line); !slices.Equal(keys[:len(requiredFields)], requiredFields) {
			t.Errorf("JSON line keys %v, want them to start with %v", keys, requiredFields)
		}
		var r results.Result
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("bad JSON line %s: %v", line, err)
		}
		seen = append(seen, r.Lib)
		if r.Scenario != "a" || r.Procs != 1 || r.G != 1 || r.Keys != 1 || r.Reps != 1 {
			t.Errorf("%s: scenario %+v", r.Lib, r)
		}
		if r.Acquisitions <= 0 || r.AcqPerS <= 0 {
			t.Errorf("%s: no acquisitions", r.Lib)
		}
		if r.Violations != 0 || r.Errors != 0 {
			t.Errorf("%s: %d violations, %d errors (last: %s)", r.Lib, r.Violations, r.Errors, r.LastError)
		}
		if !(r.P50US > 0 && r.P50US <= r.P99US && r.P99US <= r.P999US && r.P999US <= r.MaxUS) {
			t.Errorf("%s: waits not ordered: p50 %v p99 %v p99.9 %v max %v", r.Lib, r.P50US, r.P99US, r.P999US, r.MaxUS)
		}
		// Every library needs at least one command to take a lock and
		// one to release it, and Redis spends some CPU on them.
		if r.RedisCmdsPerAcq < 2 || r.RedisCPUUSPerAcq <= 0 {
			t.Errorf("%s: %v commands and %vµs Redis CPU per acquisition", r.Lib, r.RedisCmdsPerAcq, r.RedisCPUUSPerAcq)
		}
	}
	if !slices.Equal(seen, locks.All) {
		t.Errorf("results for %v, want one per library %v", seen, locks.All)
	}

	if len(f.Results) != len(locks.All) || f.Meta.RedisVersion == "" || f.Meta.Reps != 1 || f.Watchdog != nil {
		t.Errorf("results file: %d results, meta %+v, watchdog %v", len(f.Results), f.Meta, f.Watchdog)
	}
	if !strings.HasPrefix(f.Meta.Command, "go run ./cmd/lockbench -dur 300ms") {
		t.Errorf("recorded command %q", f.Meta.Command)
	}
}

// executeArgs runs lockbench with args, writing its results to a file of
// its own (-out), and returns what it printed and the results file.
func executeArgs(t *testing.T, args ...string) (*bytes.Buffer, *results.File) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lockbench.json")
	cfg, err := parseFlags(append(args, "-out", out))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, progress bytes.Buffer
	if err := execute(t.Context(), cfg, &stdout, &progress); err != nil {
		t.Fatalf("execute: %v\nprogress:\n%s", err, progress.String())
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	return &stdout, f
}

// TestEndToEndSweep runs the suite's scenario c with a one-setting sweep:
// the defaults go to Results, the other setting to Sweep, each with its
// setting, ranges and per-command counts.
func TestEndToEndSweep(t *testing.T) {
	_, f := executeArgs(t, "-suite", "-scenarios", "c", "-libs", "latchkey,latchkey-spin,redislock", "-sweep", "8ms,128ms",
		"-reps", "2", "-dur", "300ms", "-sweepdur", "200ms")
	if len(f.Results) != 3 || len(f.Sweep) != 2 || f.Idle != nil || f.Watchdog != nil {
		t.Fatalf("%d results, %d sweep points, idle %v, watchdog %v; want 3, 2 and neither", len(f.Results), len(f.Sweep), f.Idle, f.Watchdog)
	}
	for _, r := range slices.Concat(f.Results, f.Sweep) {
		if r.Scenario != "c" || r.Reps != 2 || r.Acquisitions <= 0 || r.Violations != 0 || r.Errors != 0 || r.Setting == "" {
			t.Errorf("%s (%s): %+v", r.Lib, r.Setting, r)
		}
		if !(r.Min.AcqPerS <= r.AcqPerS && r.AcqPerS <= r.Max.AcqPerS && r.Min.P99US <= r.P99US && r.P99US <= r.Max.P99US) {
			t.Errorf("%s: medians outside their ranges: %+v", r.Lib, r)
		}
		var sum float64
		for cmd, sp := range r.Commands {
			if redisinfo.Overhead(cmd) {
				t.Errorf("%s: overhead command %s among the lock's", r.Lib, cmd)
			}
			sum += sp.Median
		}
		// With two repetitions a median is a mean, so the commands add
		// up to the total.
		if math.Abs(sum-r.RedisCmdsPerAcq) > 1e-6*sum {
			t.Errorf("%s: commands add up to %v per acquisition, the total is %v", r.Lib, sum, r.RedisCmdsPerAcq)
		}
	}
	if c := f.Find(locks.Latchkey, "c").Commands; c["evalsha"].Median < 1 {
		t.Errorf("latchkey's commands %v: want at least one EVALSHA per acquisition", c)
	}
	want := []string{"latchkey-spin backoff 1ms–8ms, jittered 8", "redislock backoff 4ms–8ms, 2^(n+1) ms 8"}
	for i, r := range f.Sweep {
		if got := fmt.Sprintf("%s %s %g", r.Lib, r.Setting, r.BackoffMS); got != want[i] || r.DurS != 0.2 {
			t.Errorf("sweep point %d: %q over %gs, want %q over 0.2s", i, got, r.DurS, want[i])
		}
	}
	if f.Meta.SweepDurS != 0.2 || !slices.Equal(f.Meta.SweepMS, []float64{8, 128}) {
		t.Errorf("meta: sweep %vms over %gs", f.Meta.SweepMS, f.Meta.SweepDurS)
	}
}

// TestIdleEndToEnd runs a small idle-waiting scenario: latchkey's blocked
// waiters send Redis nothing, redislock's poll.
func TestIdleEndToEnd(t *testing.T) {
	cfg, err := parseFlags([]string{"-libs", "latchkey,redislock", "-reps", "1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.idleDur = 2600 * time.Millisecond // idle from 1s (idleSettle) to 1.75s, and from 2.25s on
	addr, _, closeRedis, err := benchredis.Get(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	admin, err := benchredis.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var progress bytes.Buffer
	b := &bench{cfg: cfg, addr: addr, admin: admin, progress: &progress}
	sc := results.Scenario{Name: "f", Procs: 2, G: 3, Keys: 1, CSUS: 1e6}
	idle, err := b.idle(t.Context(), sc)
	if err != nil {
		t.Fatalf("idle: %v\nprogress:\n%s", err, progress.String())
	}
	if len(idle.Results) != 2 || idle.Baseline.Lib != "baseline" || idle.Baseline.CPUMSPerS.Median <= 0 {
		t.Fatalf("idle results %+v", idle)
	}
	lk, rl := idle.Results[0], idle.Results[1]
	for _, r := range idle.Results {
		if r.IdleS.Median <= 0 || r.Grants.Median < 2 || r.Violations != 0 || r.Errors != 0 || r.Timeouts != 0 {
			t.Errorf("%s: %+v\nprogress:\n%s", r.Lib, r, progress.String())
		}
	}
	if rl.CmdsPerS.Median <= 0 || lk.CmdsPerS.Median > 0.05*rl.CmdsPerS.Median {
		t.Errorf("commands/s while blocked: latchkey %v, redislock %v; want latchkey's ≤ 0.05× redislock's\nprogress:\n%s",
			lk.CmdsPerS.Median, rl.CmdsPerS.Median, progress.String())
	}
}

// TestFleetEndToEnd runs scenario g with fleets of 1 and 3 processes, after
// a ramp. Alone, a process never waits: one try per acquisition and no
// subscription. In a fleet of 3, latchkey's waiters subscribe once, at
// their first wait (in the ramp, unless a slow start put it later), and
// unsubscribe once, at Close (after the run, unless it raced the end): at
// most one each per process, where one per wait would be one per
// acquisition. The spin
// lock's waiters never subscribe, and the pollers try more than once per
// acquisition. rueidislock has no count of tries.
func TestFleetEndToEnd(t *testing.T) {
	stdout, f := executeArgs(t, "-suite", "-scenarios", "g", "-fleet", "3,1", "-fleetdur", "600ms", "-fleetramp", "300ms", "-json")
	fl := f.Fleet
	if fl == nil || len(fl.Scenarios) != 2 || fl.Scenarios[0].Procs != 1 || fl.Scenarios[1].Procs != 3 || fl.Reps != 1 || fl.DurS != 0.6 || fl.RampS != 0.3 {
		t.Fatalf("fleet %+v; want sizes 1 and 3, one repetition of 0.6s after a ramp of 0.3s", fl)
	}
	if len(fl.Results) != 2*len(locks.All) || len(f.Results) != 0 || f.Idle != nil || f.Watchdog != nil {
		t.Fatalf("%d fleet results, %d others, idle %v, watchdog %v; want one per library per size and nothing else", len(fl.Results), len(f.Results), f.Idle, f.Watchdog)
	}
	// The -json lines are the fleet's results too.
	if n := strings.Count(stdout.String(), `"scenario":"g"`); n != len(fl.Results) {
		t.Errorf("%d JSON lines of scenario g, want %d", n, len(fl.Results))
	}
	for _, lib := range locks.All {
		alone, fleet := fl.Find(lib, 1), fl.Find(lib, 3)
		if alone == nil || fleet == nil {
			t.Fatalf("%s: results %v alone, %v in a fleet of 3", lib, alone, fleet)
		}
		for _, r := range []*results.FleetResult{alone, fleet} {
			if r.Scenario != "g" || r.G != 1 || r.CSUS != 5000 || r.Acquisitions <= 0 || r.Violations != 0 || r.Errors != 0 {
				t.Errorf("%s with %d processes: %+v", lib, r.Procs, r.Result)
			}
			if (r.AttemptsPerAcq != nil) != locks.CountsAttempts(lib) {
				t.Errorf("%s with %d processes: attempts %v, but CountsAttempts is %v", lib, r.Procs, r.AttemptsPerAcq, locks.CountsAttempts(lib))
			}
		}
		if alone.SubscribesPerAcq.Median != 0 || alone.UnsubscribesPerAcq.Median != 0 {
			t.Errorf("%s alone subscribed: %v, %v per acquisition", lib, alone.SubscribesPerAcq, alone.UnsubscribesPerAcq)
		}
		// The one Lock that the run's end leaves granted too late counts
		// a try and no acquisition; the one whose try the ramp's end
		// splits from its grant, an acquisition and no try.
		if a, one := alone.AttemptsPerAcq, 1/alone.Acquisitions+1e-9; a != nil && (a.Median < 1-one || a.Median > 1+one) {
			t.Errorf("%s alone: %v tries per acquisition over %v acquisitions, want 1", lib, a.Median, alone.Acquisitions)
		}
	}
	lk := fl.Find(locks.Latchkey, 3)
	// A process subscribes at most once (a busy period's start); it
	// unsubscribes at Close, after the parent's reading.
	if most, s, u := 3/lk.Acquisitions+1e-9, lk.SubscribesPerAcq.Median, lk.UnsubscribesPerAcq.Median; s > most || u != 0 {
		t.Errorf("latchkey in a fleet of 3: %v SUBSCRIBE and %v UNSUBSCRIBE per acquisition over %v acquisitions; want at most one SUBSCRIBE per process and no UNSUBSCRIBE", s, u, lk.Acquisitions)
	}
	for _, lib := range locks.Polling {
		r := fl.Find(lib, 3)
		if r.SubscribesPerAcq.Median != 0 || r.AttemptsPerAcq.Median <= 1 {
			t.Errorf("%s in a fleet of 3: %v SUBSCRIBE, %v tries per acquisition; want none and more than one", lib, r.SubscribesPerAcq.Median, r.AttemptsPerAcq.Median)
		}
	}
}

// TestGrantProtoEndToEnd runs the direct-grant prototype (locks.GrantProto)
// in the shape of the fleet, with two goroutines per process and two keys
// so that its gate and its dispatch of messages by key are exercised too:
// it must exclude, and cost about two script calls per acquisition, none of
// them a woken client's try.
func TestGrantProtoEndToEnd(t *testing.T) {
	stdout, _ := executeArgs(t, "-libs", locks.GrantProto, "-procs", "4", "-g", "2", "-keys", "2", "-cs", "1ms", "-dur", "500ms", "-reps", "1", "-json")
	var r results.Result
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		t.Fatalf("bad JSON %s: %v", stdout, err)
	}
	if r.Lib != locks.GrantProto || r.Acquisitions <= 0 || r.Violations != 0 || r.Errors != 0 {
		t.Fatalf("%+v", r)
	}
	calls := r.Commands["evalsha"].Median
	if calls < 1 || calls > 2.5 {
		t.Errorf("%.2f script calls per acquisition, want about 2 (the release and one try)", calls)
	}
}
