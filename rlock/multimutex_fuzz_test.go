package rlock

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzMultiMutexNames: a MultiMutex of up to three names is valid exactly
// when there is a name and every name is valid; then its members are the
// distinct names in byte order, each with its own Mutex's key, and listing
// the names in another order (or repeated) gives the same hold identity.
// An invalid set is ErrInvalidArgument (no names) or ErrInvalidName.
func FuzzMultiMutexNames(f *testing.F) {
	f.Add("a", "b", "c", uint8(3))
	f.Add("b", "b", "", uint8(2))
	f.Add("x{", "y", "z", uint8(1))
	f.Add("", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, a, b, c string, n uint8) {
		names := []string{a, b, c}[:n%4]
		cl, err := NewClient(stubClient{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		mm := cl.MultiMutex(names...)
		valid := len(names) > 0
		for _, name := range names {
			valid = valid && validateName(name, false) == nil
		}
		switch {
		case len(names) == 0:
			if !errors.Is(mm.err, ErrInvalidArgument) {
				t.Fatalf("no names: want ErrInvalidArgument, got %v", mm.err)
			}
			return
		case !valid:
			if !errors.Is(mm.err, ErrInvalidName) {
				t.Fatalf("%q: want ErrInvalidName, got %v", names, mm.err)
			}
			return
		case mm.err != nil:
			t.Fatalf("valid names %q rejected: %v", names, mm.err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(names)))
		if !slices.Equal(mm.Names(), want) || len(mm.members) != len(want) {
			t.Fatalf("%q: names %q, %d members; want %q", names, mm.Names(), len(mm.members), want)
		}
		var id strings.Builder
		for i, m := range mm.members {
			if m.name != want[i] || m.keys.Lock != cl.Mutex(want[i]).Key() {
				t.Fatalf("member %d is %q at %q, want %q", i, m.name, m.keys.Lock, want[i])
			}
			id.WriteString(m.keys.Lock)
		}
		if mm.id != id.String() {
			t.Fatalf("id %q, want %q", mm.id, id.String())
		}
		reversed := slices.Clone(names)
		slices.Reverse(reversed)
		if other := cl.MultiMutex(append(reversed, names...)...); other.id != mm.id || !slices.Equal(other.names, mm.names) {
			t.Fatalf("%q and %q name different holds", names, append(reversed, names...))
		}
	})
}
