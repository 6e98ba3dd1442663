package batchserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestQuietLaneRepliesAndCreditsWrittenInPlace: on a quiet connection
// each call's reply and each cast's credit is written by the goroutine that
// ran the entry (no writer is running). One caller alternates calls and
// casts through a window of 4 entries and 2 KiB: every call gets its own
// reply, in order, and every cast's place and bytes come back, or the lane
// would stop at the window within a few entries.
func TestQuietLaneRepliesAndCreditsWrittenInPlace(t *testing.T) {
	s, p := newServer(t, batchserver.WithWindow(4), batchserver.WithWindowBytes(2048))
	counter := new(Counter)
	require.NoError(t, s.RegisterName("Counter", counter, ""))
	addr := serve(t, s)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)

	const n = 2000
	for i := 0; i < n; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r), "call %d", i)
		require.Equal(t, 3*i, r.C, "call %d got another's reply", i)
		require.NoError(t, c.Cast(ctx, addr, "Counter", "Inc", &testsvc.Args{A: i}), "cast %d", i)
	}
	require.True(t, eventually(10*time.Second, func() bool { return counter.n.Load() == n }), "ran %d of %d casts", counter.n.Load(), n)
	require.True(t, eventually(10*time.Second, func() bool { return batchserver.HeldBytes(p) == 0 }), "held bytes %d", batchserver.HeldBytes(p))
}
