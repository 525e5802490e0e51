package precise

import (
	"syscall"
	"time"
)

// sleep blocks the calling thread in nanosleep for about d, resuming after
// signals (the Go runtime's preemption signals interrupt it).
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
