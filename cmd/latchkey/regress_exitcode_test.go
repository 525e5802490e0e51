package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestRegressBadInputExitsUsage: status, list, force-unlock, leader and run
// connected before they checked NAME or PATTERN, so with Redis out of
// reach bad input exited 69 (unreachable) instead of the documented 2.
func TestRegressBadInputExitsUsage(t *testing.T) {
	const down = "redis://127.0.0.1:1"
	for _, args := range [][]string{
		{"list", "{x}"},
		{"status", ""},
		{"status", "a{b}"},
		{"status", "--kind", "semaphore", ""},
		{"force-unlock", "--yes", ""},
		{"leader", "a{b}"},
		{"leader", "--watch", ""},
		{"run", "a{b}", "--", "true"},
	} {
		r := latchkey(t, "", append([]string{args[0], "--redis", down}, args[1:]...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "invalid lock name") {
			t.Errorf("%q with Redis down: exit %d, stderr %q; want %d, invalid lock name", args, r.code, r.stderr, exitUsage)
		}
	}
}

// TestRegressDeadlineIsNoOutage: exitFor took a command's own time limit
// running out (context.DeadlineExceeded, which is a net.Error) for Redis
// out of reach: 69 instead of 1 for a slow list that Redis answered.
func TestRegressDeadlineIsNoOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	for _, err := range []error{
		ctx.Err(),
		fmt.Errorf("latchkey: list: inspect mutex %q: %w", "a", ctx.Err()),
	} {
		if got := exitFor(err); got != exitError {
			t.Errorf("exitFor(%v) = %d, want %d", err, got, exitError)
		}
	}
	// A deadline beside a failure to reach Redis is still an outage.
	if got := exitFor(fmt.Errorf("%w: %w", ctx.Err(), errUnavailable)); got != exitUnavailable {
		t.Errorf("a deadline with Redis unreachable: exit %d, want %d", got, exitUnavailable)
	}
	if got := exitFor(os.ErrDeadlineExceeded); got != exitUnavailable {
		t.Errorf("an i/o timeout: exit %d, want %d", got, exitUnavailable)
	}
}
