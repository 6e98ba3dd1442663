package testsvc

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// WriteCounter is an rpcx server plugin that counts the Write calls made on
// accepted connections (each is one write syscall on a TCP conn): add it
// before any other plugin that wraps connections.
type WriteCounter struct {
	Writes atomic.Int64
}

// HandleConnAccept wraps the connection in a counting one.
func (w *WriteCounter) HandleConnAccept(c net.Conn) (net.Conn, bool) {
	return &countingConn{Conn: c, n: &w.Writes}, true
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

// ProcessCPU returns the user and system CPU time this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessWriteSyscalls returns the write-family syscalls this process has
// made (syscw in /proc/self/io), or -1 where that file is unavailable.
func ProcessWriteSyscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
