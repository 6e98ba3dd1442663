//go:build linux

// Package synstall gives tests a loopback address whose dials hang, as a
// host behind a firewall that drops SYNs would: a listener with an accept
// backlog of 0 that nobody accepts from, its queue filled. It starts no
// goroutines.
package synstall

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// Listener returns a loopback listener with an accept backlog of 0,
// closed when the test ends.
func Listener(t testing.TB) net.Listener {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatalf("bind: %v", err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		t.Fatalf("listen: %v", err)
	}
	f := os.NewFile(uintptr(fd), "backlog0")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatalf("file listener: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Fill dials addr until a dial hangs: the accept queue of a listener
// nobody accepts from is full, and the kernel drops further SYNs. The
// connections stay open until the test ends.
func Fill(t testing.TB, addr string) {
	t.Helper()
	for i := 0; i < 16; i++ {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			return // the queue is full: SYNs are dropped now
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatalf("%s accepted 16 connections with a backlog of 0: the accept queue did not fill up", addr)
}

// Addr returns a loopback address whose dials hang until the dialer's own
// timeout.
func Addr(t testing.TB) string {
	t.Helper()
	addr := Listener(t).Addr().String()
	Fill(t, addr)
	return addr
}
