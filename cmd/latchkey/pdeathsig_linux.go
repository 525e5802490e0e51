package main

import "syscall"

// cmdSysProcAttr has the kernel send CMD SIGTERM when latchkey dies, even
// by SIGKILL or the OOM killer, which latchkey cannot pass on: CMD must
// not run on once nothing keeps its lock. (Strictly, when the thread that
// started CMD ends; Go ends threads only for goroutines that exit locked
// to one, which run does not do.)
func cmdSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
