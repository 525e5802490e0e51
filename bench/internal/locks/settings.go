package locks

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// Polling lists the libraries whose waiters poll Redis, and so have a retry
// setting that Options.Backoff changes: latchkey-spin's backoff cap,
// redsync's retry delay and redislock's backoff cap. latchkey waits for a
// pub/sub message and rueidislock for a client-side-cache invalidation;
// neither has one.
var Polling = []string{LatchkeySpin, Redsync, Redislock}

// ErrNoSetting reports a Backoff for a library that has no retry setting.
var ErrNoSetting = errors.New("locks: this library has no retry setting")

// Tunable tells whether lib has a retry setting (Options.Backoff).
func Tunable(lib string) bool { return slices.Contains(Polling, lib) }

// DefaultBackoff is the Backoff lib runs with when Options.Backoff is 0: the
// cap of latchkey-spin's and redislock's backoff. It is 0 for redsync, whose
// default delay is random (50–250ms) rather than one value, and for the
// libraries without a retry setting.
func DefaultBackoff(lib string) time.Duration {
	switch lib {
	case LatchkeySpin:
		return rlock.DefaultSpinBackoffMax
	case Redislock:
		return RedislockBackoffMax
	}
	return 0
}

// Setting describes the retry setting lib runs with when Options.Backoff
// is backoff (0: its default), for tables and charts.
func Setting(lib string, backoff time.Duration) string {
	if backoff == 0 {
		backoff = DefaultBackoff(lib)
	}
	switch lib {
	case Latchkey:
		return "pub/sub wake-up, no polling"
	case Rueidislock:
		return "invalidation wake-up, no polling"
	case LatchkeySpin:
		return fmt.Sprintf("backoff %v–%v, jittered", rlock.DefaultSpinBackoffMin, backoff)
	case Redislock:
		// Its n-th wait is 2^(n+1) ms (4, 8, 16 ...) within
		// [RedislockBackoffMin, cap]: the floor never binds, and a cap at or
		// below the first wait makes every wait the cap.
		if first := redislockFirstBackoff(backoff); first < backoff {
			return fmt.Sprintf("backoff %v–%v, 2^(n+1) ms", first, backoff)
		}
		return fmt.Sprintf("constant %v", backoff)
	case Redsync:
		if backoff == 0 {
			return "delay random 50ms–250ms (its default)"
		}
		return fmt.Sprintf("delay %v", backoff)
	}
	return ""
}

// ShortSetting is Setting in a few characters, for chart labels: "cap
// 32ms", "delay 8ms", "delay 50–250ms"; "" for a library without a retry
// setting.
func ShortSetting(lib string, backoff time.Duration) string {
	if backoff == 0 {
		backoff = DefaultBackoff(lib)
	}
	switch lib {
	case LatchkeySpin, Redislock:
		return fmt.Sprintf("cap %v", backoff)
	case Redsync:
		if backoff == 0 {
			return "delay 50–250ms"
		}
		return fmt.Sprintf("delay %v", backoff)
	}
	return ""
}

// checkBackoff refuses a Backoff the library cannot take.
func checkBackoff(name string, opts Options) error {
	switch {
	case opts.Backoff < 0:
		return fmt.Errorf("locks: %s: negative Backoff %v", name, opts.Backoff)
	case opts.Backoff > 0 && !Tunable(name):
		return fmt.Errorf("%w: %s (Backoff %v)", ErrNoSetting, name, opts.Backoff)
	case opts.Backoff > 0 && name != Redsync && opts.Backoff < time.Millisecond:
		// latchkey-spin's backoff starts at 1ms, and redislock's never
		// waits less than RedislockBackoffMin (1ms): a cap below would not
		// be the setting measured.
		return fmt.Errorf("locks: %s: Backoff %v is below the backoff's 1ms start", name, opts.Backoff)
	}
	return nil
}
