package main

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/latchkey/latchkey/rlock"
)

// TestForceUnlockKinds: force-unlock --kind takes an RWMutex's or a
// Semaphore's holds; before it asks it shows who holds the lock, and it
// names them once done; a key of another type under the lock's name is
// refused and kept; a bad --kind is a usage error (issue 21, defect 10).
func TestForceUnlockKinds(t *testing.T) {
	rc, c := clients(t)
	ctx := context.Background()
	name := lockName(t)
	rctx, err := c.RWMutex(name).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := latchkey(t, "n\n", "force-unlock", "--kind", "rwmutex", name)
	if r.code != exitError || !strings.Contains(r.stderr, c.ID()) || !strings.Contains(r.stderr, "rwmutex/read") ||
		strings.Index(r.stderr, c.ID()) > strings.Index(r.stderr, "[y/N]") || rctx.Err() != nil {
		t.Errorf("answer n: exit %d, stderr %q, lock context %v; want 1, the holder before the question, the lock kept", r.code, r.stderr, rctx.Err())
	}
	r = latchkey(t, "y\n", "force-unlock", "--kind", "rwmutex", name)
	if info, err := c.InspectRWMutex(ctx, name); r.code != 0 || !strings.Contains(r.stdout, "deleted") || !strings.Contains(r.stdout, c.ID()) || err != nil || info.Held() {
		t.Errorf("answer y: exit %d, stdout %q, stderr %q, held %v (%v); want 0, the holder named, the lock gone", r.code, r.stdout, r.stderr, info.Held(), err)
	}
	// A lock context dropped unreleased is released when collected (the
	// leak check), so each stays reachable until its force-unlock is done.
	runtime.KeepAlive(rctx)
	sctx, err := c.Semaphore(name, 2).Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	r = latchkey(t, "", "force-unlock", "--yes", "--kind", "semaphore", name)
	if info, err := c.InspectSemaphore(ctx, name); r.code != 0 || !strings.Contains(r.stdout, "deleted") || err != nil || info.Held() {
		t.Errorf("semaphore: exit %d, stdout %q, stderr %q, held %v (%v)", r.code, r.stdout, r.stderr, info.Held(), err)
	}
	runtime.KeepAlive(sctx)

	key := rlock.DefaultPrefix + ":{" + name + "}"
	if err := rc.Do(ctx, rc.B().Set().Key(key).Value("the application's").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(context.Background(), rc.B().Del().Key(key).Build())
	r = latchkey(t, "", "force-unlock", "--yes", name)
	if n, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64(); r.code != exitError || !strings.Contains(r.stderr, "another type") || err != nil || n != 1 {
		t.Errorf("a string at the lock's key: exit %d, stderr %q, key kept %d (%v); want 1, refused, kept", r.code, r.stderr, n, err)
	}
	if r := latchkey(t, "", "force-unlock", "--kind", "flock", name); r.code != exitUsage || !strings.Contains(r.stderr, "--kind") {
		t.Errorf("--kind flock: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
	}
}
