//go:build !linux

package sockout

import "syscall"

// unacked cannot tell outside Linux.
func unacked(syscall.RawConn) (int, bool) { return 0, false }
