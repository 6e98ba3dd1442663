package batchserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestParkedWorkersFollowTheLoad: a burst of concurrent calls leaves its
// goroutines parked for a moment, but with the connection still open and
// quiet they end over the next seconds, halving every second, well before
// the idle timeout (10 s) would end them all at once: the server's
// goroutines (and their stacks) follow the load down.
func TestParkedWorkersFollowTheLoad(t *testing.T) {
	addr, _, p := startServer(t)
	c := newClient(t, batchclient.WithHeartbeat(200*time.Millisecond, 5*time.Second))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)

	const n = 2000
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		return c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 300, B: i}, &r)
	})
	burstEnd := time.Now()
	parked := batchserver.IdleWorkers(p)
	require.Greater(t, parked, 100, "goroutines parked after the burst")

	// The lane stays connected and sends heartbeats; the server trims at
	// each. Before the idle timeout, most are gone.
	shrunk := eventually(7*time.Second, func() bool { return batchserver.IdleWorkers(p) <= parked/4 })
	require.True(t, shrunk, "%d goroutines parked %v after the burst (%d right after it)",
		batchserver.IdleWorkers(p), time.Since(burstEnd).Round(time.Millisecond), parked)

	// The server still serves.
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.Equal(t, 6, r.C)
}

// TestQuietConnectionLetsGoOfReplyBuffers: a burst of calls leaves the
// connection's reply buffers (the frame buffer and the recycled payload
// buffers) sized by it; once the connection is quiet, the lane's heartbeat
// lets the server drop them, and the connection still serves.
func TestQuietConnectionLetsGoOfReplyBuffers(t *testing.T) {
	addr, _, p := startServer(t)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)

	concurrently(t, 2000, func(i int) error {
		var r testsvc.Reply
		return c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r)
	})
	kept := batchserver.KeptReplyBytes(p)
	require.Greater(t, kept, 0, "reply buffers kept right after the burst")
	require.True(t, eventually(10*time.Second, func() bool { return batchserver.KeptReplyBytes(p) == 0 }),
		"%d of %d bytes still kept", batchserver.KeptReplyBytes(p), kept)

	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.Equal(t, 6, r.C)
}
