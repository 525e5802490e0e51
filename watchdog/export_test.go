package watchdog

import (
	"time"

	"github.com/redis/rueidis"
)

// NewStill returns a Watchdog whose loop never runs, so that a test can
// scan it itself (Scan) and see each wake-up Add asks for (TakeWake).
func NewStill(client rueidis.Client, opts Options) (*Watchdog, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	w := newWatchdog(client, opts)
	close(w.done) // Close has no loop to wait for
	return w, nil
}

// Scan is the loop's scan of the entries: it gives up those past their
// deadline at now and returns the earliest deadline left.
func (w *Watchdog) Scan(now time.Time) time.Time { return w.expire(now) }

// TakeWake reports whether a wake-up of the loop is pending, and clears it.
func (w *Watchdog) TakeWake() bool {
	select {
	case <-w.added:
		return true
	default:
		return false
	}
}

// Due is the test a tick applies to each lease (see due).
func (w *Watchdog) Due(e *Entry, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.due(e, now)
}
