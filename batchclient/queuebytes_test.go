package batchclient_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestQueueBytesGivenBack: the bytes of the entries a lane writes are
// given back to its queue's byte count. Round after round, a long call
// holds the server's window of 1 while three 1 KiB casts queue behind it
// within a 4 KiB byte cap, and a fourth is refused (fail fast); had the
// written entries' bytes stayed counted, the second round would be
// refused.
func TestQueueBytesGivenBack(t *testing.T) {
	addr, p := startServer(t, false, batchserver.WithWindow(1))
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithQueueLimits(100, 4<<10),
		batchclient.WithOverflow(batchclient.OverflowFailFast))
	waitConnected(t, c, addr)
	calls := p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 })
	casts := p.Metrics().Get("rpcxbatch.server.casts").(interface{ Count() int64 })
	payload := make([]byte, 1000)
	for round := 1; round <= 5; round++ {
		ctx := ctxT(t, 10*time.Second)
		done := make(chan *client.Call, 1)
		c.Go(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 300, B: round}, &testsvc.Reply{}, done)
		require.Eventually(t, func() bool { return calls.Count() == int64(round) }, 5*time.Second, time.Millisecond,
			"round %d: the long call did not reach the server", round)
		for i := range 3 {
			require.NoError(t, c.Cast(ctx, addr, "Echo", "Bytes", &payload), "round %d: cast %d refused with room in the queue", round, i)
		}
		_, queued := batchclient.RoomWaiters(c, addr)
		require.Equal(t, 3, queued, "round %d", round)
		require.ErrorIs(t, c.Cast(ctx, addr, "Echo", "Bytes", &payload), batchclient.ErrOverloaded,
			"round %d: a cast past the byte cap was queued", round)
		select {
		case call := <-done:
			require.NoError(t, call.Error)
			require.Equal(t, round, call.Reply.(*testsvc.Reply).C)
		case <-ctx.Done():
			t.Fatalf("round %d: the long call did not return", round)
		}
		require.Eventually(t, func() bool { return casts.Count() == int64(3*round) }, 5*time.Second, time.Millisecond,
			"round %d: the queued casts did not run", round)
		require.Eventually(t, func() bool { _, q := batchclient.RoomWaiters(c, addr); return q == 0 }, 5*time.Second, time.Millisecond)
	}
}
