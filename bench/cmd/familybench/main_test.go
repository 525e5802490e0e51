package main

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/latchkey/latchkey/bench/internal/results"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEndToEnd runs both scenarios briefly against a redis-server that
// familybench starts: every rw variant acquires both kinds, without
// violations or errors, and Redis' cost per acquisition is measured; so
// does every semaphore variant.
func TestEndToEnd(t *testing.T) {
	out := filepath.Join(t.TempDir(), "family.json")
	cfg, err := parseFlags([]string{"-reps", "2", "-dur", "300ms", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, progress bytes.Buffer
	if err := execute(t.Context(), cfg, &stdout, &progress); err != nil {
		t.Fatalf("execute: %v\nprogress:\n%s", err, progress.String())
	}
	f, err := results.ReadFamily(out)
	if err != nil || f == nil {
		t.Fatalf("ReadFamily: %v, %v", f, err)
	}
	if len(f.Scenarios) != 2 || f.Meta.Reps != 2 || f.Meta.RedisVersion == "" || !strings.HasPrefix(f.Meta.Command, "go run ./cmd/familybench -reps 2") {
		t.Fatalf("meta %+v, %d scenarios", f.Meta, len(f.Scenarios))
	}
	rw, sem := &f.Scenarios[0], &f.Scenarios[1]
	if got := names(rw); got != "rwmutex,spin-rwmutex,mutex" || rw.Baseline != "rwmutex" {
		t.Errorf("rw variants %s, baseline %s", got, rw.Baseline)
	}
	if got := names(sem); got != "semaphore,spin-semaphore" || sem.Baseline != "semaphore" {
		t.Errorf("semaphore variants %s, baseline %s", got, sem.Baseline)
	}
	for _, sc := range f.Scenarios {
		for _, v := range sc.Variants {
			if len(v.Reps) != 2 {
				t.Errorf("%s %s: %d repetitions", sc.Name, v.Name, len(v.Reps))
			}
			if viol, errs, _, last := v.Totals(); viol != 0 || errs != 0 {
				t.Errorf("%s %s: %d violations, %d errors (last: %s)", sc.Name, v.Name, viol, errs, last)
			}
			for _, r := range v.Reps {
				for _, kind := range sc.Kinds {
					o := r.Ops[kind]
					if o.Count == 0 && strings.HasPrefix(v.Name, "spin-") && o.MaxUS > 0 {
						// Polling writers can starve behind readers for a
						// whole short run (what the benchmark shows): their
						// cut-off waits are recorded, their grants are not.
						continue
					}
					if o.Count == 0 || !(o.P50US <= o.P99US && o.P99US <= o.MaxUS) {
						t.Errorf("%s %s %s: %+v", sc.Name, v.Name, kind, o)
					}
				}
				// An acquisition and a release are a command each at
				// least, and Redis spends some CPU on them.
				if !(r.CmdsPerAcq() >= 2 && r.CPUUSPerAcq() > 0) {
					t.Errorf("%s %s: %v commands, %vµs Redis CPU per acquisition", sc.Name, v.Name, r.CmdsPerAcq(), r.CPUUSPerAcq())
				}
			}
		}
	}
	base, spin := rw.Variant("rwmutex"), rw.Variant("spin-rwmutex")
	if r := spin.Ratio(base, func(r *results.FamilyRep) float64 { return r.PerS("") }); math.IsNaN(r.Median) || r.Median <= 0 {
		t.Errorf("spin-rwmutex / rwmutex throughput ratio %+v", r)
	}
	if !strings.Contains(stdout.String(), "rw: RWMutex, 95 % reads, 4 × 8 goroutines") {
		t.Errorf("table:\n%s", stdout.String())
	}
}

func names(sc *results.FamilyScenario) string {
	var ns []string
	for _, v := range sc.Variants {
		ns = append(ns, v.Name)
	}
	return strings.Join(ns, ",")
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-scenarios", "rw,nosuch"},
		{"-scenarios", ","},
		{"-reps", "0"},
		{"-reads", "1.5"},
		{"-size", "0"},
		{"-cs", "20s"},
		{"extra"},
	} {
		if _, err := parseFlags(args); !errors.Is(err, ErrUsage) {
			t.Errorf("parseFlags(%q): %v, want ErrUsage", args, err)
		}
	}
	cfg, err := parseFlags(nil)
	if err != nil || cfg.reps != DefaultReps || cfg.size != DefaultSize || len(cfg.scenarios) != 2 {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

func TestOccupancy(t *testing.T) {
	var o occupancy
	if !o.enter(false, 2) || !o.enter(false, 2) || o.enter(false, 2) {
		t.Error("a third shared hold within a size of 2 went unseen")
	}
	o.leave(false)
	if o.enter(true, 0) {
		t.Error("an exclusive hold beside shared ones went unseen")
	}
	o.leave(true)
	o.leave(false)
	o.leave(false)
	if !o.enter(true, 0) || o.enter(false, 0) {
		t.Error("a shared hold beside an exclusive one went unseen")
	}
}

func TestDraw(t *testing.T) {
	cfg, err := parseFlags([]string{"-scenarios", "rw"})
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.buildScenarios()[0]
	rng := newRand(cfg.seed, 0)
	var reads int
	const n = 20000
	for range n {
		if draw(rng, sc.Shares) == 0 {
			reads++
		}
	}
	if frac := float64(reads) / n; math.Abs(frac-DefaultReads) > 0.01 {
		t.Errorf("%.3f of the draws read, want about %v", frac, DefaultReads)
	}
}
