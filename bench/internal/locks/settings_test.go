package locks

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
)

func TestSettings(t *testing.T) {
	for _, lib := range All {
		if Tunable(lib) != slices.Contains(Polling, lib) {
			t.Errorf("Tunable(%s) disagrees with Polling", lib)
		}
		if Setting(lib, 0) == "" {
			t.Errorf("%s has no description of its default setting", lib)
		}
	}
	for lib, want := range map[string]string{
		Latchkey:     "pub/sub wake-up, no polling",
		LatchkeySpin: "backoff 1ms–128ms, jittered",
		Redislock:    "backoff 4ms–128ms, 2^(n+1) ms",
		Redsync:      "delay random 50ms–250ms (its default)",
	} {
		if got := Setting(lib, 0); got != want {
			t.Errorf("Setting(%s, 0) = %q, want %q", lib, got, want)
		}
	}
	// A Backoff equal to the default is the default.
	if Setting(LatchkeySpin, DefaultBackoff(LatchkeySpin)) != Setting(LatchkeySpin, 0) {
		t.Error("latchkey-spin's default cap is described unlike its default")
	}
	if got := Setting(LatchkeySpin, 8*time.Millisecond); got != "backoff 1ms–8ms, jittered" {
		t.Errorf("Setting(latchkey-spin, 8ms) = %q", got)
	}
	for backoff, want := range map[time.Duration]string{
		8 * time.Millisecond: "backoff 4ms–8ms, 2^(n+1) ms",
		4 * time.Millisecond: "constant 4ms",
		2 * time.Millisecond: "constant 2ms",
	} {
		if got := Setting(Redislock, backoff); got != want {
			t.Errorf("Setting(redislock, %v) = %q, want %q", backoff, got, want)
		}
	}
	if got := Setting(Redsync, 32*time.Millisecond); got != "delay 32ms" {
		t.Errorf("Setting(redsync, 32ms) = %q", got)
	}
	for _, c := range []struct {
		lib     string
		backoff time.Duration
		want    string
	}{{LatchkeySpin, 0, "cap 128ms"}, {Redislock, 2 * time.Millisecond, "cap 2ms"}, {Redsync, 0, "delay 50–250ms"}, {Redsync, 8 * time.Millisecond, "delay 8ms"}, {Latchkey, 0, ""}} {
		if got := ShortSetting(c.lib, c.backoff); got != c.want {
			t.Errorf("ShortSetting(%s, %v) = %q, want %q", c.lib, c.backoff, got, c.want)
		}
	}
	if DefaultBackoff(Redsync) != 0 || DefaultBackoff(Latchkey) != 0 || DefaultBackoff(Redislock) != 128*time.Millisecond {
		t.Error("DefaultBackoff: redsync's default is random, latchkey has none, redislock's cap is 128ms")
	}
}

// TestRedislockBackoff pins what Setting says of redislock to the
// library's own arithmetic: ExponentialBackoff's first wait is 2 << 1 ms,
// above the 1ms floor, then 8ms, 16ms ... up to the cap.
func TestRedislockBackoff(t *testing.T) {
	r := redislock.ExponentialBackoff(RedislockBackoffMin, 128*time.Millisecond)
	var got []time.Duration
	for range 7 {
		got = append(got, r.NextBackoff())
	}
	want := []time.Duration{4, 8, 16, 32, 64, 128, 128}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Errorf("ExponentialBackoff(%v, 128ms) waits %v, want %v", RedislockBackoffMin, got, want)
	}
	if got[0] != 4*time.Millisecond || !strings.Contains(Setting(Redislock, 0), "4ms") {
		t.Errorf("first wait %v; Setting(redislock, 0) = %q, which must say 4ms", got[0], Setting(Redislock, 0))
	}
	if c := redislock.ExponentialBackoff(RedislockBackoffMin, 2*time.Millisecond); c.NextBackoff() != 2*time.Millisecond || c.NextBackoff() != 2*time.Millisecond {
		t.Error("a 2ms cap is not a constant 2ms")
	}
}

func TestOpenBackoff(t *testing.T) {
	// Refused before any connection is made.
	for _, lib := range []string{Latchkey, Rueidislock} {
		if _, err := Open(lib, Options{Addr: "127.0.0.1:1", Backoff: time.Millisecond}); !errors.Is(err, ErrNoSetting) {
			t.Errorf("Open(%s) with a Backoff: %v, want ErrNoSetting", lib, err)
		}
	}
	for _, o := range []Options{{Backoff: -time.Millisecond}, {Backoff: time.Microsecond}} {
		if _, err := Open(Redislock, o); err == nil {
			t.Errorf("Open(redislock, Backoff %v) accepted it", o.Backoff)
		}
	}
	// go-redis connects lazily, so the go-redis libraries open without a
	// server.
	lib, err := Open(Redislock, Options{Addr: "127.0.0.1:1", Backoff: 8 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if b := lib.(*redislockLib).backoff; b != 8*time.Millisecond {
		t.Errorf("redislock's cap %v, want 8ms", b)
	}
	lib.Close()
	lib, err = Open(Redislock, Options{Addr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if b := lib.(*redislockLib).backoff; b != RedislockBackoffMax {
		t.Errorf("redislock's default cap %v, want %v", b, RedislockBackoffMax)
	}
	lib.Close()
	for backoff, n := range map[time.Duration]int{0: 2, 5 * time.Millisecond: 3} {
		lib, err := Open(Redsync, Options{Addr: "127.0.0.1:1", Backoff: backoff})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(lib.(*redsyncLib).opts); got != n {
			t.Errorf("redsync with Backoff %v: %d options, want %d", backoff, got, n)
		}
		lib.Close()
	}
}
