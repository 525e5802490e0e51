//go:build !linux

package precise

import "time"

// sleep falls back to time.Sleep where there is no nanosleep to call; the
// spin that follows it in Wait cannot undo an overshoot.
func sleep(d time.Duration) { time.Sleep(d) }
