package batchclient_test

import (
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testsvc"
)

// servePlainAt serves Arith with plain rpcx (no batch plugin) at addr.
func servePlainAt(t *testing.T, addr string) *server.Server {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	go s.Serve("tcp", addr)
	require.Eventually(t, func() bool { return s.Address() != nil }, 5*time.Second, time.Millisecond)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPlainServerUpgradedToBatch: a rolling upgrade. A server without the
// batch plugin is served over plain rpcx; restarted at the same address
// with the plugin, it is asked again and served by lanes, without the
// client being restarted.
func TestPlainServerUpgradedToBatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()

	plain := servePlainAt(t, addr)
	c := newClient(t, batchclient.WithReprobePlain(time.Hour)) // only the broken connection asks again
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	assert.Equal(t, 6, r.C)
	require.True(t, c.Info(addr).Plain)

	plain.Close()
	_, p := startServerAt(t, addr)
	// Calls go on (the first may meet the restart); the broken plain
	// connection has the client ask the server again.
	require.Eventually(t, func() bool {
		c.Call(ctxT(t, time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r)
		return c.Info(addr).Status == batchclient.Connected
	}, 10*time.Second, 20*time.Millisecond, "info: %+v", c.Info(addr))
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 5}, &r))
	assert.Equal(t, 20, r.C)
	assert.Positive(t, p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 }).Count(), "calls over lanes")
	assert.False(t, c.Info(addr).Plain)
}

// TestPlainServerAskedAgain: a server without the plugin is asked again
// every ReprobePlain and stays on plain rpcx, counted as one fallback.
func TestPlainServerAskedAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	servePlainAt(t, addr)
	c := newClient(t, batchclient.WithReprobePlain(20*time.Millisecond))
	var r testsvc.Reply
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 3}, &r))
		assert.Equal(t, 9, r.C)
		time.Sleep(10 * time.Millisecond)
	}
	assert.True(t, c.Info(addr).Plain)
	assert.Equal(t, int64(1), c.Metrics().Get("rpcxbatch.client.fallbacks").(interface{ Count() int64 }).Count())
}
