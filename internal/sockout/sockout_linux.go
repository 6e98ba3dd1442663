package sockout

import (
	"syscall"
	"unsafe"
)

// unacked asks the kernel for the socket's output not yet acknowledged
// (SIOCOUTQ, which is TIOCOUTQ's number on Linux).
func unacked(rc syscall.RawConn) (int, bool) {
	var n int32
	var errno syscall.Errno
	err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	})
	if err != nil || errno != 0 {
		return 0, false
	}
	return int(n), true
}
