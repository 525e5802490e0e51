package main

import (
	"strings"
	"testing"
)

// TestRegressErrorSaysLatchkeyOnce: a subcommand's error line starts with
// "latchkey: " once. The library's errors start with it too, and every
// subcommand printed them after its own: "latchkey: latchkey: invalid lock
// name", "taking the lock "a{b}": latchkey: invalid lock name".
func TestRegressErrorSaysLatchkeyOnce(t *testing.T) {
	for _, args := range [][]string{
		{"leader", "a{b}"},
		{"leader", "--watch", "a{b}"},
		{"force-unlock", "--yes", "a{b}"},
		{"status", "a{b}"},
		{"run", "a{b}", "--", "true"},
	} {
		r := latchkey(t, "", args...)
		if r.code == 0 || !strings.HasPrefix(r.stderr, "latchkey: ") || strings.Count(r.stderr, "latchkey: ") != 1 {
			t.Errorf("latchkey %s: exit %d, stderr %q; want an error that says \"latchkey: \" once", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
