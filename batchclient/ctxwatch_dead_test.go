package batchclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestSharedContextWatchDropsLostLanes: a shared context that never ends
// keeps its watch, but not the lanes of a pool that was lost (and their
// buffers): they are dropped when the pool goes, not only when a call of
// that context next goes to a new lane, which may never happen.
func TestSharedContextWatchDropsLostLanes(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s)
	require.NoError(t, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)

	c := newClient(t)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.True(t, batchclient.WatchContext(c, ctx))
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.Positive(t, batchclient.WatchedLanes(c))

	stop() // the server goes, and with it the lane pool
	deadline := time.Now().Add(5 * time.Second)
	for batchclient.WatchedLanes(c) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Zero(t, batchclient.WatchedLanes(c), "the watch still holds the lanes of the lost pool (status %v)", c.Info(addr).Status)
	require.Equal(t, 1, batchclient.SharedWatches(c), "the context's watch itself stays")
}
