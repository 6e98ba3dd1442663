package batchclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Gate is a cast target that blocks until released, tracking how many run
// at once.
type Gate struct {
	release chan struct{}
	running atomic.Int64
	peak    atomic.Int64
	done    atomic.Int64
}

// Wait blocks until the gate opens.
func (g *Gate) Wait(ctx context.Context, _ *testsvc.Args, _ *testsvc.Reply) error {
	n := g.running.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-g.release:
	case <-time.After(20 * time.Second):
	}
	g.running.Add(-1)
	g.done.Add(1)
	return nil
}

// The server's window bounds what one lane can make it hold: with a slow
// handler, casts beyond the window wait in the client's bounded queue
// (where the overflow policy applies) instead of piling up on the server;
// credits let them through once handlers finish.
func TestWindowBoundsUnfinishedEntries(t *testing.T) {
	g := &Gate{release: make(chan struct{})}
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Gate", g, ""))
	_, err := batchserver.New(s, batchserver.WithWindow(64), batchserver.WithPoolSize(1))
	require.NoError(t, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))

	c := newClient(t, batchclient.WithQueueLimits(100, 1<<20), batchclient.WithOverflow(batchclient.OverflowFailFast))
	waitConnected(t, c, addr)
	cast := func() error { return c.Cast(context.Background(), addr, "Gate", "Wait", &testsvc.Args{}) }
	for i := 0; i < 64; i++ {
		require.NoError(t, cast())
	}
	require.Eventually(t, func() bool { return g.running.Load() == 64 }, 5*time.Second, 5*time.Millisecond)
	// The window is full: the next casts wait in the client's queue, and
	// the 101st finds it full.
	accepted := 64
	var lastErr error
	for i := 0; i < 1000; i++ {
		if lastErr = cast(); lastErr != nil {
			break
		}
		accepted++
	}
	require.ErrorIs(t, lastErr, batchclient.ErrOverloaded)
	assert.Equal(t, 164, accepted, "64 on the server (the window) and 100 in the queue")
	time.Sleep(100 * time.Millisecond) // nothing more reaches the server while the window is full
	assert.Equal(t, int64(64), g.peak.Load())

	close(g.release)
	require.Eventually(t, func() bool { return g.done.Load() == int64(accepted) }, 10*time.Second, 5*time.Millisecond)
	assert.LessOrEqual(t, g.peak.Load(), int64(64))
	// Credits came back: the lane takes new casts again.
	require.NoError(t, c.Cast(context.Background(), addr, "Gate", "Wait", &testsvc.Args{}))
	require.Eventually(t, func() bool { return g.done.Load() == int64(accepted)+1 }, 5*time.Second, 5*time.Millisecond)
}

// A large entry waiting for bytes (not for a full queue) is woken when the
// queue drains.
func TestLargeEntryWokenWhenQueueDrains(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Slow", new(testsvc.Slow), ""))
	_, err := batchserver.New(s, batchserver.WithWindow(1), batchserver.WithPoolSize(1))
	require.NoError(t, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	c := newClient(t, batchclient.WithQueueLimits(100, 4<<20))
	waitConnected(t, c, addr)

	mid, big := make([]byte, 3<<19), make([]byte, 3<<20) // 1.5 MiB, 3 MiB
	ctx := ctxT(t, 10*time.Second)
	require.NoError(t, c.Cast(ctx, addr, "Slow", "Take", &mid)) // to the server (window 1)
	require.NoError(t, c.Cast(ctx, addr, "Slow", "Take", &mid)) // queued behind the window
	start := time.Now()
	require.NoError(t, c.Cast(ctxT(t, 5*time.Second), addr, "Slow", "Take", &big)) // waits for bytes
	assert.Less(t, time.Since(start), 4500*time.Millisecond, "the large cast was not woken when the queue drained")
}
