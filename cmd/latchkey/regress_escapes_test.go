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
// printable, in the record of the deletion and in the table before the
// question.
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
	r := latchkey(t, "", "force-unlock", "--yes", name)
	if r.code != 0 || strings.ContainsRune(r.stdout, '\x1b') || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, `\x1b[31m\nx`) {
		t.Errorf("force-unlock %s: exit %d, stdout %q, stderr %q; want one line, every control character escaped", name, r.code, r.stdout, r.stderr)
	}
	runtime.KeepAlive(lctx)
	// A hold without a record, as something else may write: its owner shows
	// in the table before the question. It is no owner id, so the hash is
	// not latchkey's and is kept.
	other := name + "-other"
	if err := rc.Do(ctx, rc.B().Hset().Key(rlock.DefaultPrefix+":{"+other+"}").FieldValue().FieldValue("owner"+evil, "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(ctx, rc.B().Del().Key(rlock.DefaultPrefix+":{"+other+"}").Build())
	r = latchkey(t, "y\n", "force-unlock", other)
	if r.code != exitError || strings.ContainsRune(r.stderr, '\x1b') || !strings.Contains(r.stderr, `\x1b[31m\nx`) || !strings.Contains(r.stderr, "not latchkey's") {
		t.Errorf("force-unlock %s: exit %d, stdout %q, stderr %q; want 1, every control character escaped, refused", other, r.code, r.stdout, r.stderr)
	}
}
