package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestConflictExitCode: a busy lock exits 1, or --conflict-exit-code's
// status, and CMD does not run; --wait takes plain numbers as seconds.
func TestConflictExitCode(t *testing.T) {
	name := lockName(t)
	holdLock(t, locks(t), name)
	for _, tc := range []struct {
		args []string
		want int
		took time.Duration // at least
	}{
		{[]string{"--wait", "0"}, 1, 0},
		{[]string{"--wait", "0", "--conflict-exit-code", "7"}, 7, 0},
		{[]string{"--conflict-exit-code", "0", "--wait", "0.3"}, 0, 300 * time.Millisecond},
		{[]string{"--wait", "1"}, 1, time.Second},
		{[]string{"--wait", "200ms"}, 1, 200 * time.Millisecond},
	} {
		start := time.Now()
		r := latchkey(t, "", append(append([]string{"run"}, tc.args...), name, "echo", "ran")...)
		took := time.Since(start)
		if r.code != tc.want || !strings.Contains(r.stderr, "busy") || r.stdout != "" || took < tc.took {
			t.Errorf("%q: exit %d after %v, stdout %q, stderr %q; want %d after %v at least, busy, CMD not run", tc.args, r.code, took, r.stdout, r.stderr, tc.want, tc.took)
		}
		// A wait that ran out says who blocked it (rlock.WaitError).
		if tc.took > 0 && (!strings.Contains(r.stderr, "held by ") || !strings.Contains(r.stderr, "1st in line") || !strings.Contains(r.stderr, "ran out")) {
			t.Errorf("%q: stderr %q does not say who held the lock and its place in line", tc.args, r.stderr)
		}
	}
}

// TestUnavailable: a Redis that cannot be reached, or refuses the
// credentials, exits 69 (EX_UNAVAILABLE) from every subcommand, not the
// busy lock's 1; a bad URL is a usage error.
func TestUnavailable(t *testing.T) {
	addr := strings.TrimPrefix(redisURL, "redis://")
	for _, tc := range []struct {
		url  string
		want int
	}{
		{"redis://127.0.0.1:1", exitUnavailable},
		{"redis://nobody:wrong@" + addr, exitUnavailable},
		{"redis://" + addr + "/nodb", exitUsage},
	} {
		for _, args := range [][]string{
			{"run", "--redis", tc.url, "name", "echo", "ran"},
			{"status", "--redis", tc.url, "name"},
			{"list", "--redis", tc.url},
			{"force-unlock", "--yes", "--redis", tc.url, "name"},
		} {
			r := latchkey(t, "", args...)
			if r.code != tc.want || r.stdout != "" || !strings.Contains(r.stderr, "Redis") {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d", args, r.code, r.stdout, r.stderr, tc.want)
			}
		}
	}
}

// TestLatchkeyRedisURL: $LATCHKEY_REDIS_URL comes before $REDIS_URL, and
// --redis before both.
func TestLatchkeyRedisURL(t *testing.T) {
	env := []string{"REDIS_URL=redis://127.0.0.1:1", "LATCHKEY_REDIS_URL=" + redisURL}
	if r := latchkeyEnv(t, env, "", "run", lockName(t), "echo", "ran"); r.code != 0 || r.stdout != "ran\n" {
		t.Errorf("LATCHKEY_REDIS_URL: exit %d, stdout %q, stderr %q; want 0, ran", r.code, r.stdout, r.stderr)
	}
	if r := latchkeyEnv(t, env, "", "status", "--redis", "redis://127.0.0.1:1", lockName(t)); r.code != exitUnavailable {
		t.Errorf("--redis: exit %d, stderr %q; want %d", r.code, r.stderr, exitUnavailable)
	}
}

// TestShared: run --shared takes the read side of an RWMutex: readers
// share it, a writer excludes them, and CMD gets no token (read holds have
// none).
func TestShared(t *testing.T) {
	c := locks(t)
	ctx := context.Background()
	name := lockName(t)
	rw := c.RWMutex(name)
	wctx, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := latchkey(t, "", "run", "--shared", "--wait", "0", name, "echo", "ran"); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "busy") {
		t.Errorf("with a writer: exit %d, stdout %q, stderr %q; want 1, busy", r.code, r.stdout, r.stderr)
	}
	if err := rw.Unlock(wctx); err != nil {
		t.Fatal(err)
	}
	_, stop := startHolder(t, []string{"--shared"}, name)
	r := latchkey(t, "", "run", "--shared", "--wait", "0", name, "sh", "-c", `echo "token=$LATCHKEY_TOKEN"`)
	if r.code != 0 || r.stdout != "token=\n" {
		t.Errorf("second reader: exit %d, stdout %q, stderr %q; want 0, no token", r.code, r.stdout, r.stderr)
	}
	var st lockOut
	r = latchkey(t, "", "status", "--json", "--kind", "rwmutex", name)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Holders) != 1 || st.Holders[0].Mode != "read" || st.Holders[0].Client.Name != "latchkey run sh" {
		t.Errorf("status --kind rwmutex: exit %d, %v, %q", r.code, err, r.stdout)
	}
	if _, ok, err := rw.TryLock(ctx); ok || err != nil {
		t.Errorf("a writer got in beside run --shared: %v, %v", ok, err)
	}
	if r := stop(); r.code != 0 {
		t.Fatalf("holder: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestPermits: run --permits N --size S takes N of a Semaphore's S
// permits, waits (or is busy) when fewer are free, and refuses a size the
// semaphore is not used with.
func TestPermits(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	sem := c.Semaphore(name, 3)
	pctx, err := sem.Acquire(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sem.Release(pctx) }()
	script := `echo "token=$LATCHKEY_TOKEN"`
	for _, tc := range []struct {
		args   []string
		want   int
		stdout string
	}{
		{[]string{"--permits", "1", "--size", "3"}, 0, "token=\n"},
		{[]string{"--size", "3"}, 0, "token=\n"}, // one permit
		{[]string{"--permits", "2", "--size", "3"}, 1, ""},
		{[]string{"--permits", "1", "--size", "4"}, exitUsage, ""},
	} {
		r := latchkey(t, "", append(append([]string{"run", "--wait", "0"}, tc.args...), name, "sh", "-c", script)...)
		if r.code != tc.want || r.stdout != tc.stdout {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q", tc.args, r.code, r.stdout, r.stderr, tc.want, tc.stdout)
		}
	}
	if n, err := sem.Available(context.Background()); err != nil || n != 1 {
		t.Errorf("after the runs: %d permits free, %v; want 1", n, err)
	}
}

// TestFlagBounds: flags out of their bounds are usage errors (exit 2)
// whose message names the bound.
func TestFlagBounds(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		bound string
	}{
		{[]string{"--lease", "500us"}, "--lease 500µs: want between 1ms"},
		{[]string{"--lease", "9000h"}, "8760h"},
		{[]string{"--conflict-exit-code", "256"}, "255"},
		{[]string{"--permits", "2"}, "--size"},
		{[]string{"--permits", "4", "--size", "3"}, "--size"},
		{[]string{"--permits", "0", "--size", "3"}, "--permits"},
		{[]string{"--shared", "--size", "3"}, "--shared"},
		{[]string{"--wait", "1e300"}, "out of range"},
	} {
		r := latchkey(t, "", append(append([]string{"run"}, tc.args...), "name", "true")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.bound) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, exitUsage, tc.bound)
		}
	}
}

// TestVersion: --version prints the module's version, "(devel)" when the
// build does not know it.
func TestVersion(t *testing.T) {
	r := latchkey(t, "", "--version")
	v, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "latchkey ")
	if r.code != 0 || !ok || (v != "(devel)" && !strings.HasPrefix(v, "v")) {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want 0 and latchkey vX or (devel)", r.code, r.stdout, r.stderr)
	}
}

// TestRegressWaitRanOutSaidOnce: a --wait that ran out said so twice,
// "context canceled: --wait 500ms ran out (last error: --wait 500ms ran
// out)": the wait's cause came back as the error of the try it cut short,
// and was added to the context's error as the last transient error.
func TestRegressWaitRanOutSaidOnce(t *testing.T) {
	name := lockName(t)
	c := locks(t)
	holdLock(t, c, name)
	wctx, err := c.RWMutex(name + "-rw").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RWMutex(name + "-rw").Unlock(wctx) })
	sctx, err := c.Semaphore(name+"-sem", 1).Acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Semaphore(name+"-sem", 1).Release(sctx) })
	for _, args := range [][]string{
		{"run", "--wait", "0.5", name, "true"},
		{"run", "--wait", "0.3", name, "true"},
		{"run", "--wait", "0.5", "--shared", name + "-rw", "true"},
		{"run", "--wait", "0.5", "--size", "1", name + "-sem", "true"},
	} {
		r := latchkey(t, "", args...)
		if r.code != exitError || strings.Count(r.stderr, "ran out") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want %d, \"ran out\" said once", args, r.code, r.stderr, exitError)
		}
	}
}
