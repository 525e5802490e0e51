//go:build !linux

package redistest

import "syscall"

// serverSysProcAttr is nothing special: only Linux has a parent-death
// signal, so elsewhere a server outlives a test process killed by SIGKILL
// (Close and the harness' cleanup stop it otherwise).
func serverSysProcAttr() *syscall.SysProcAttr { return nil }
