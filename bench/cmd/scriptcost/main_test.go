package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs every variant briefly on a redis-server of its own and checks
// that each completes cycles and reports Redis CPU and script time for them.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), config{g: 4, dur: 200 * time.Millisecond, reps: 1}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2+len(variants) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2+len(variants), out.String())
	}
	for i, v := range variants {
		f := strings.Fields(lines[2+i])
		if f[0] != v.name {
			t.Errorf("line %d is %q, want variant %s", 2+i, lines[2+i], v.name)
		}
		// Redis CPU, script time and rate medians: all positive.
		for _, j := range []int{1, 3, 5} {
			if strings.HasPrefix(f[j], "0.") && strings.Trim(f[j], "0.") == "" || f[j] == "0" {
				t.Errorf("%s: figure %d is %s:\n%s", v.name, j, f[j], out.String())
			}
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	for _, cfg := range []config{{g: 0, dur: time.Second, reps: 1}, {g: 1, dur: 0, reps: 1}, {g: 1, dur: time.Second, reps: 0}, {addr: "10.0.0.1:6379", g: 1, dur: time.Second, reps: 1}} {
		if err := run(t.Context(), cfg, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%+v) = nil, want an error", cfg)
		}
	}
}
