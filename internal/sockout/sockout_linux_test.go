package sockout_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/sockout"
)

// What a peer with a small receive buffer does not read stays unacknowledged
// in the writer's socket; once the peer reads it all, nothing is left.
func TestUnackedUntilThePeerReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	reader, err := d.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer reader.Close()
	writer, err := ln.Accept()
	require.NoError(t, err)
	defer writer.Close()

	n, ok := sockout.Unacked(writer)
	require.True(t, ok)
	assert.Zero(t, n)

	const size = 64 << 10
	require.NoError(t, writer.SetWriteDeadline(time.Now().Add(5*time.Second)))
	_, err = writer.Write(make([]byte, size))
	require.NoError(t, err)
	n, ok = sockout.Unacked(writer)
	require.True(t, ok)
	assert.Greater(t, n, 0, "a peer that reads nothing took all %d bytes", size)

	buf := make([]byte, size)
	require.NoError(t, reader.SetReadDeadline(time.Now().Add(5*time.Second)))
	for got := 0; got < size; {
		k, err := reader.Read(buf)
		require.NoError(t, err)
		got += k
	}
	deadline := time.Now().Add(5 * time.Second)
	for n, _ = sockout.Unacked(writer); n > 0 && time.Now().Before(deadline); n, _ = sockout.Unacked(writer) {
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, n, "bytes left unacknowledged after the peer read them all")

	writer.Close()
	_, ok = sockout.Unacked(writer)
	assert.False(t, ok, "a closed connection")

	_, ok = sockout.Unacked(&net.UnixConn{})
	assert.False(t, ok, "not TCP")
}

// wrapped embeds a connection as cmux.MuxConn does.
type wrapped struct {
	net.Conn
}

// Unacked sees through a connection embedded in another, as rpcx's
// listener hands them out with its HTTP gateway on.
func TestUnackedThroughAnEmbeddingWrapper(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	n, ok := sockout.Unacked(&wrapped{Conn: c})
	assert.True(t, ok)
	assert.Zero(t, n)
	_, ok = sockout.Unacked(&wrapped{})
	assert.False(t, ok, "an empty wrapper")
}
