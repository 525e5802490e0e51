// Package precise waits for a duration without time.Sleep's overshoot.
package precise

import (
	"runtime"
	"time"
)

// SpinSlack is the tail of a wait spent yielding in a loop instead of
// sleeping.
//
// time.Sleep is no good for a critical section of a millisecond: on Linux
// the Go scheduler parks in epoll with a millisecond timeout, so Sleep(500µs)
// returns after about 1.1ms and Sleep(1ms) 100–300µs late. A nanosleep system
// call on the goroutine's thread (the runtime hands the thread's P to other
// goroutines meanwhile) wakes within the kernel's timer slack, 50–100µs on
// an idle machine. Sleeping all but the last SpinSlack that way, then
// checking the clock between runtime.Gosched calls, ends the wait within a
// few µs of its deadline while spinning for at most about SpinSlack.
const SpinSlack = 200 * time.Microsecond

// Wait returns once d has elapsed on the monotonic clock, and not much later.
// It returns at once for d <= 0. It never returns early; on a loaded machine
// it can still return late, when the goroutine does not get a CPU.
func Wait(d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := time.Now().Add(d)
	if d > SpinSlack {
		sleep(d - SpinSlack)
	}
	for time.Now().Before(deadline) {
		runtime.Gosched()
	}
}

// Sleep blocks for about d without spinning: a nanosleep system call on
// the goroutine's thread, which overshoots by the kernel's timer slack
// (50–100µs on an idle machine) rather than by time.Sleep's millisecond.
// It is for holds that many goroutines keep at once, where Wait's spinning
// tail would take the CPU from the server being measured.
func Sleep(d time.Duration) {
	if d > 0 {
		sleep(d)
	}
}
