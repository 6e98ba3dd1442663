//go:build !linux

package etcdtest

import "syscall"

// ChildProcAttr returns nil outside Linux, which has no parent-death
// signal: there the child is stopped only by its owner's Stop.
func ChildProcAttr() *syscall.SysProcAttr { return nil }
