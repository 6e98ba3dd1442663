package batchclient_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// keepAlive returns whether c has TCP keep-alive on and its idle time.
func keepAlive(t *testing.T, c net.Conn) (bool, time.Duration) {
	t.Helper()
	tc, ok := c.(*net.TCPConn)
	require.True(t, ok, "a %T, not a TCP connection", c)
	rc, err := tc.SyscallConn()
	require.NoError(t, err)
	var on, idle int
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		if on, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); serr != nil {
			return
		}
		idle, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
	}))
	require.NoError(t, serr)
	return on != 0, time.Duration(idle) * time.Second
}

// Option.TCPKeepAlivePeriod applies to lanes as to rpcx's connection.
func TestTCPKeepAlivePeriodOnLanes(t *testing.T) {
	addr, _ := startServer(t, false)
	opt := client.DefaultOption
	opt.TCPKeepAlivePeriod = 37 * time.Second

	pc := client.NewClient(opt)
	require.NoError(t, pc.Connect("tcp", addr))
	t.Cleanup(func() { pc.Close() })
	on, idle := keepAlive(t, pc.Conn)
	assert.True(t, on)
	assert.Equal(t, 37*time.Second, idle, "plain rpcx")

	c := newClient(t, batchclient.FromRPCX(opt))
	waitConnected(t, c, addr)
	on, idle = keepAlive(t, batchclient.LaneConn(c, addr))
	assert.True(t, on)
	assert.Equal(t, 37*time.Second, idle, "lane")
}
