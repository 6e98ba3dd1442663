package lane_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// unreadBytes tells bytes the peer sent that nobody has read yet: the
// heartbeat uses it not to call a peer frozen when this process was only
// too busy to read.
func TestUnreadBytesSeesPendingData(t *testing.T) {
	a, b := tcpPair(t)
	require.Zero(t, lane.UnreadBytes(a))
	_, err := b.Write([]byte("hello"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return lane.UnreadBytes(a) == 5 }, 2*time.Second, time.Millisecond)
}

func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	b := <-accepted
	require.NotNil(t, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
