package childproc

import "syscall"

// sysProcAttr has Linux kill the child when the parent dies.
//
// Strictly, the signal comes when the OS thread that started the child
// ends; Go ends a thread only when a goroutine locked to it exits without
// unlocking, which Start's callers do not do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
