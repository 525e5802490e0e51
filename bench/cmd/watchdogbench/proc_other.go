//go:build !linux

package main

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere the
// benchmark kills its burners when it ends normally.
func dieWithParent() *syscall.SysProcAttr { return nil }
