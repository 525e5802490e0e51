package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
)

// TestEndToEnd runs every library briefly on scenario a's shape, with
// lockbench starting its own redis-server and re-executing this test binary
// as its worker.
func TestEndToEnd(t *testing.T) {
	out := filepath.Join(t.TempDir(), "lockbench.json")
	cfg, err := parseFlags([]string{"-dur", "300ms", "-reps", "1", "-name", "a", "-json", "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, progress bytes.Buffer
	if err := execute(t.Context(), cfg, &stdout, &progress); err != nil {
		t.Fatalf("execute: %v\nprogress:\n%s", err, progress.String())
	}

	var seen []string
	sc := bufio.NewScanner(&stdout)
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

	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Results) != len(locks.All) || f.Meta.RedisVersion == "" || f.Meta.Reps != 1 || f.Watchdog != nil {
		t.Errorf("results file: %d results, meta %+v, watchdog %v", len(f.Results), f.Meta, f.Watchdog)
	}
	if !strings.HasPrefix(f.Meta.Command, "go run ./cmd/lockbench -dur 300ms") {
		t.Errorf("recorded command %q", f.Meta.Command)
	}
	if _, err := os.Stat(out); err != nil {
		t.Error(err)
	}
}
