package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// trapper is a CMD that says it started by creating the file $1, and on
// SIGTERM prints "term" and exits $2.
const trapper = `trap 'echo term; kill $! 2>/dev/null; exit $2' TERM; sleep 30 & : > "$1"; wait`

// TestLostLock: a force-unlock while CMD runs makes latchkey send CMD
// SIGTERM, say so on stderr and exit 75, whatever CMD exits with.
func TestLostLock(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	started := filepath.Join(t.TempDir(), "started")
	cmd, out, errOut := command(t, "", "run", "--watchdog-timeout", "600ms", name, "--", "sh", "-c", trapper, "sh", started, "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started)
	if ok, err := c.ForceUnlock(context.Background(), name); err != nil || !ok {
		t.Fatalf("ForceUnlock: %v, %v", ok, err)
	}
	r := finish(t, cmd, cmd.Wait(), out, errOut)
	if r.code != exitLost || r.stdout != "term\n" || !strings.Contains(r.stderr, "lost") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 75, term, lost", r.code, r.stdout, r.stderr)
	}
}

// TestLostLockKill: a CMD that ignores SIGTERM gets SIGKILL after --grace.
func TestLostLockKill(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	started := filepath.Join(t.TempDir(), "started")
	// exec: the sleep is CMD itself, so SIGKILL ends it.
	cmd, out, errOut := command(t, "", "run", "--watchdog-timeout", "600ms", "--grace", "200ms", name, "--",
		"sh", "-c", `trap '' TERM; : > "$1"; exec sleep 30`, "sh", started)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started)
	start := time.Now()
	if _, err := c.ForceUnlock(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, cmd.Wait(), out, errOut)
	if r.code != exitLost || !strings.Contains(r.stderr, "killing") {
		t.Errorf("exit %d, stderr %q; want 75 and a kill", r.code, r.stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to end", took)
	}
}

// TestLeaseRunsOut: a CMD that outlives --lease is stopped as for a loss.
func TestLeaseRunsOut(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	r := latchkey(t, "", "run", "--lease", "500ms", lockName(t), "--", "sh", "-c", trapper, "sh", started, "0")
	if r.code != exitLost || r.stdout != "term\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 75, term", r.code, r.stdout, r.stderr)
	}
}

// TestSignalForwarded: SIGTERM, SIGINT and SIGQUIT sent to latchkey reach CMD,
// latchkey exits with CMD's status, and the lock is released.
func TestSignalForwarded(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT} {
		started := filepath.Join(t.TempDir(), "started")
		script := strings.ReplaceAll(trapper, "TERM", "TERM INT QUIT")
		cmd, out, errOut := command(t, "", "run", name, "--", "sh", "-c", script, "sh", started, "7")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, started)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		r := finish(t, cmd, cmd.Wait(), out, errOut)
		if r.code != 7 || r.stdout != "term\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 7 and term", sig, r.code, r.stdout, r.stderr)
		}
		if held(t, c, name) {
			t.Errorf("%v: the lock is still held", sig)
		}
	}
}

// TestWaits: without --wait, run waits for the holder to let go; a signal
// while it waits ends the wait with 128+N and CMD never runs.
func TestWaits(t *testing.T) {
	rc, c := clients(t)
	name := lockName(t)
	m := c.Mutex(name)
	lctx, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	// A signal while waiting.
	cmd, out, errOut := command(t, "", "run", name, "echo", "ran")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, rc, name)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, cmd.Wait(), out, errOut)
	if r.code != 128+int(syscall.SIGTERM) || r.stdout != "" || !strings.Contains(r.stderr, "waiting") {
		t.Errorf("signalled while waiting: exit %d, stdout %q, stderr %q; want 143, nothing, waiting", r.code, r.stdout, r.stderr)
	}

	// A release while waiting.
	cmd, out, errOut = command(t, "", "run", name, "echo", "ran")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, rc, name)
	if err := m.Unlock(lctx); err != nil {
		t.Fatal(err)
	}
	if r := finish(t, cmd, cmd.Wait(), out, errOut); r.code != 0 || r.stdout != "ran\n" {
		t.Errorf("after the release: exit %d, stdout %q, stderr %q; want 0, ran", r.code, r.stdout, r.stderr)
	}
}

// waitQueued waits until a client queues for the lock name: the latchkey
// process the test started, since the test's own client does not wait.
func waitQueued(t *testing.T, rc rueidis.Client, name string) {
	t.Helper()
	queue := luascripts.NewKeys(rlock.DefaultPrefix + ":{" + name + "}").Queue
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := rc.Do(context.Background(), rc.B().Zcard().Key(queue).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("latchkey did not queue for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUsage: bad command lines exit 2 with the usage on stderr; -h exits 0
// with it on stdout.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"run"},
		{"run", "name"},
		{"run", "name", "--"},
		{"run", "--no-such-flag", "name", "true"},
		{"run", "--wait", "soon", "name", "true"},
		{"run", "--wait", "-1s", "name", "true"},
		{"run", "--lease", "0s", "name", "true"},
		{"force-unlock"},
		{"force-unlock", "--yes", "a", "b"},
		{"status"},
		{"status", "a", "b"},
		{"status", "--frobnicate", "a"},
		{"list", "a", "b"},
	} {
		r := latchkey(t, "", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "sage") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and the usage", args, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{{"-h"}, {"run", "-h"}, {"force-unlock", "-h"}, {"status", "-h"}, {"list", "-h"}} {
		r := latchkey(t, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage") {
			t.Errorf("%q: exit %d, stdout %q; want 0 and the usage", args, r.code, r.stdout)
		}
	}
}

// TestForceUnlock: without --yes force-unlock asks, and anything but yes
// leaves the lock; with --yes, or a yes, it deletes it.
func TestForceUnlock(t *testing.T) {
	c, probe := locks(t), locks(t) // probe: held asks a client that holds nothing
	name := lockName(t)
	m := c.Mutex(name)
	lctx, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{"n\n", "", "whatever\n"} {
		r := latchkey(t, answer, "force-unlock", name)
		if r.code != exitError || !strings.Contains(r.stderr, "[y/N]") || lctx.Err() != nil {
			t.Errorf("answer %q: exit %d, stderr %q, lock context %v; want 1, a question, the lock kept", answer, r.code, r.stderr, lctx.Err())
		}
		if !held(t, probe, name) {
			t.Fatalf("answer %q: the lock is gone", answer)
		}
	}
	r := latchkey(t, "", "force-unlock", "--yes", name)
	if r.code != 0 || !strings.Contains(r.stdout, "deleted") || held(t, probe, name) {
		t.Errorf("--yes: exit %d, stdout %q, stderr %q; want 0 and the lock gone", r.code, r.stdout, r.stderr)
	}
	_ = m.Unlock(lctx)
	holdLock(t, c, name)
	if r := latchkey(t, "y\n", "force-unlock", name); r.code != 0 || held(t, probe, name) {
		t.Errorf("answer y: exit %d, stderr %q; want 0 and the lock gone", r.code, r.stderr)
	}
	if r := latchkey(t, "", "force-unlock", "--yes", name); r.code != 0 || !strings.Contains(r.stdout, "no lock") {
		t.Errorf("no lock: exit %d, stdout %q; want 0, no lock", r.code, r.stdout)
	}
}
