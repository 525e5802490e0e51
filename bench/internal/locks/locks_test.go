package locks

import (
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseList(t *testing.T) {
	got, err := ParseList(" rueidislock,latchkey,,latchkey ")
	if err != nil || !slices.Equal(got, []string{Rueidislock, Latchkey}) {
		t.Errorf("ParseList = %v, %v; want [rueidislock latchkey]", got, err)
	}
	for _, s := range []string{"", ",", "latchkey,redlock"} {
		if _, err := ParseList(s); !errors.Is(err, ErrUnknownLib) {
			t.Errorf("ParseList(%q): %v, want ErrUnknownLib", s, err)
		}
	}
	if _, err := Open("redlock", Options{}); !errors.Is(err, ErrUnknownLib) {
		t.Errorf("Open(redlock): %v, want ErrUnknownLib", err)
	}
	for _, p := range Peers {
		if !slices.Contains(All, p) || p == Latchkey || p == LatchkeySpin {
			t.Errorf("peer %q is not another project's library in All", p)
		}
	}
}
