package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressRunWaitOutage: a `run --wait` whose wait runs out while Redis
// is out of reach (its last try failed to reach it) exits 69 (Redis could not be reached), not with the busy
// code: with --conflict-exit-code 0, the documented "skip if busy", an
// outage was silently taken for a busy lock.
func TestRegressRunWaitOutage(t *testing.T) {
	name := lockName(t)
	proxy := startProxy(t, strings.TrimPrefix(redisURL, "redis://"))
	rc, c := clients(t)
	m := c.Mutex(name)
	// A short lease: the waiter tries again when it ends, during the outage.
	lctx, err := m.Lock(context.Background(), rlock.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(lctx)

	cmd := exec.Command(binary, "run", "--redis", "redis://"+proxy.addr(), "--wait", "3", "--conflict-exit-code", "0", name, "--", "true")
	cmd.Env = append(cmd.Environ(), childEnv...)
	cmd.WaitDelay = 5 * time.Second
	stderr := lineReader(t, cmd, cmd.StderrPipe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Queued behind the holder: it waits, subscribed, through the proxy.
	queue := m.Key() + ":q"
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rc.Do(context.Background(), rc.B().Zcard().Key(queue).Build()).AsInt64()
		if err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("latchkey run did not queue for %q; stderr %q", name, stderr.all())
		}
		time.Sleep(10 * time.Millisecond) // polling Redis: the process says nothing while it waits
	}
	proxy.setDown(true)
	stderr.drain()
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitUnavailable {
		t.Fatalf("run --wait with Redis gone mid-wait: %v; want exit %d; stderr %q", err, exitUnavailable, stderr.all())
	}
}
