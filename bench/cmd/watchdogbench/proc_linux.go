package main

import "syscall"

// dieWithParent has the kernel kill a burner when the benchmark dies, so
// that an interrupted run leaves no spinning process behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
