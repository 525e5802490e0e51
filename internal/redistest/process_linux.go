package redistest

import "syscall"

// serverSysProcAttr kills the server with the test process. Go delivers
// Pdeathsig when the OS thread that forked the child exits, not only the
// process; the Go runtime only retires threads whose goroutine exited while
// locked with runtime.LockOSThread, so this is reliable unless test code
// leaks locked threads.
func serverSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
