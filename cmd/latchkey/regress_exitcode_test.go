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

// TestRegressBadOptionExitsUsage: a bad --watchdog-timeout or --prefix was
// checked only by rlock.NewClient, after rueidis had connected, so with
// Redis out of reach it exited 69 (unreachable) instead of the documented
// 2; with Redis up, the message named Options fields (WatchdogInterval)
// that the CLI has no flag for.
func TestRegressBadOptionExitsUsage(t *testing.T) {
	down := []string{"LATCHKEY_REDIS_URL=redis://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string // in the message
	}{
		{[]string{"run", "--watchdog-timeout", "0.02", "x", "true"}, "--watchdog-timeout 20ms: want 30ms to 8760h"},
		{[]string{"run", "--watchdog-timeout", "8761h", "x", "true"}, "--watchdog-timeout 8761h: want 30ms to 8760h"},
		{[]string{"run", "--prefix", "a{b", "x", "true"}, `--prefix "a{b"`},
		{[]string{"status", "--prefix", "}", "x"}, `--prefix "}"`},
		{[]string{"list", "--prefix", "a\xff"}, `--prefix "a\xff"`},
		{[]string{"force-unlock", "--yes", "--prefix", strings.Repeat("p", 257), "x"}, "--prefix is 257 bytes"},
		{[]string{"leader", "--prefix", "{", "x"}, `--prefix "{"`},
	} {
		r := latchkeyEnv(t, down, "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "Watchdog") || strings.Contains(r.stderr, "Prefix") {
			t.Errorf("%q with Redis down: exit %d, stderr %q; want %d, %q in the CLI's terms", c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
}
