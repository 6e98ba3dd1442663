package batchclient

import (
	"crypto/tls"
	"net"
	"syscall"
	"unsafe"
)

// unreadBytes returns how many bytes the kernel holds for conn that nobody
// has read yet (SIOCINQ), or 0 when that cannot be told.
func unreadBytes(conn net.Conn) int {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	rc.Control(func(fd uintptr) {
		const siocinq = 0x541B // FIONREAD: bytes in the receive queue
		var v int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, siocinq, uintptr(unsafe.Pointer(&v))); errno == 0 {
			n = int(v)
		}
	})
	return n
}
