//go:build !linux

package main

import "syscall"

// cmdSysProcAttr is nothing special: only Linux has a parent-death signal,
// so elsewhere CMD outlives a latchkey killed by SIGKILL (see the package
// comment).
func cmdSysProcAttr() *syscall.SysProcAttr { return nil }
