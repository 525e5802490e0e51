//go:build !linux

package childproc

import "syscall"

// sysProcAttr is nothing special: only Linux has a parent-death signal.
func sysProcAttr() *syscall.SysProcAttr { return nil }
