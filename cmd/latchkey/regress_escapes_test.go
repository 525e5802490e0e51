package main

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressForceUnlockEscapes: force-unlock named the holders it deleted
// with their client name (or owner id) as Redis had it, so whoever can
// write to Redis could send escape sequences to the operator's terminal or
// forge a line. They are shown as status shows them: quoted when not
// printable.
func TestRegressForceUnlockEscapes(t *testing.T) {
	rc, _ := clients(t)
	ctx := context.Background()
	const evil = "\x1b[31m\nx"
	c, err := rlock.NewClient(rc, rlock.Options{ClientName: "client" + evil})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := lockName(t)
	lctx, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A hold without a record, as something else may write: its owner shows.
	other := name + "-other"
	if err := rc.Do(ctx, rc.B().Hset().Key(rlock.DefaultPrefix+":{"+other+"}").FieldValue().FieldValue("owner"+evil, "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(ctx, rc.B().Del().Key(rlock.DefaultPrefix+":{"+other+"}").Build())
	for _, n := range []string{name, other} {
		r := latchkey(t, "", "force-unlock", "--yes", n)
		if r.code != 0 || strings.ContainsRune(r.stdout, '\x1b') || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, `\x1b[31m\nx`) {
			t.Errorf("force-unlock %s: exit %d, stdout %q, stderr %q; want one line, every control character escaped", n, r.code, r.stdout, r.stderr)
		}
	}
	runtime.KeepAlive(lctx)
}
