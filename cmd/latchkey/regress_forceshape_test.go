package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// TestRegressForceUnlockDamaged: `force-unlock --yes` deleted any hash at
// the lock's key, so a wrong --prefix deleted an application's hash. With
// --yes it now refuses a lock that status shows damaged (a person decides,
// seeing it), and the library refuses a hash that is not of a lock's
// shape, asked or not; a lock whose only damage is its holder record is
// still deleted when the operator says yes.
func TestRegressForceUnlockDamaged(t *testing.T) {
	rc, _ := clients(t)
	ctx := context.Background()
	name := lockName(t)
	key := "app:{" + name + "}"
	hset := func(kv ...string) {
		t.Helper()
		if err := rc.Do(ctx, rc.B().Arbitrary("HSET").Keys(key).Args(kv...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() bool {
		n, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	t.Cleanup(func() { rc.Do(context.Background(), rc.B().Del().Key(key).Build()) })

	// The application's hash: damaged, refused with --yes.
	hset("name", "bob", "email", "b@x")
	r := latchkey(t, "", "force-unlock", "--yes", "--prefix", "app", name)
	if r.code != exitError || !strings.Contains(r.stderr, "damaged") || !strings.Contains(r.stderr, "--yes") || !kept() {
		t.Errorf("--yes, an application's hash: exit %d, stdout %q, stderr %q, kept %v; want 1, refused as damaged, kept", r.code, r.stdout, r.stderr, kept())
	}
	// Confirmed, the library refuses it all the same.
	r = latchkey(t, "y\n", "force-unlock", "--prefix", "app", name)
	if r.code != exitError || !strings.Contains(r.stderr, "not latchkey's") || !kept() {
		t.Errorf("answer y, an application's hash: exit %d, stdout %q, stderr %q, kept %v; want 1, not latchkey's, kept", r.code, r.stdout, r.stderr, kept())
	}
	// A hash of integers is no lock either, though status reads it as one.
	delKey(t, rc, key)
	hset("views", "12")
	r = latchkey(t, "", "force-unlock", "--yes", "--prefix", "app", name)
	if r.code != exitError || !strings.Contains(r.stderr, "not latchkey's") || !kept() {
		t.Errorf("--yes, a hash of integers: exit %d, stdout %q, stderr %q, kept %v; want 1, not latchkey's, kept", r.code, r.stdout, r.stderr, kept())
	}
	// A lock whose holder record is damaged: --yes refuses, a yes deletes.
	delKey(t, rc, key)
	hset("0b8e2f3c-1d4a-4b5c-8d6e-7f8091a2b3c4:1", "1", "#rec", "not a record")
	r = latchkey(t, "", "force-unlock", "--yes", "--prefix", "app", name)
	if r.code != exitError || !strings.Contains(r.stderr, "damaged") || !kept() {
		t.Errorf("--yes, a damaged record: exit %d, stdout %q, stderr %q, kept %v; want 1, refused as damaged, kept", r.code, r.stdout, r.stderr, kept())
	}
	r = latchkey(t, "y\n", "force-unlock", "--prefix", "app", name)
	if r.code != 0 || !strings.Contains(r.stdout, "deleted") || kept() {
		t.Errorf("answer y, a damaged record: exit %d, stdout %q, stderr %q, kept %v; want 0, deleted", r.code, r.stdout, r.stderr, kept())
	}
}

func delKey(t *testing.T, rc rueidis.Client, key string) {
	t.Helper()
	if err := rc.Do(context.Background(), rc.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}
