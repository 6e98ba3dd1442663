package batchserver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// slowOnceHook is a PostReadRequest plugin that blocks, once, on the
// first call to Arith.Sleep it reads, for longer than the plugin waits
// for a missing frame: as rpcx's ReqRateLimitingPlugin with block=true
// waits for a token, or any read hook that takes its time.
type slowOnceHook struct {
	once    sync.Once
	entered chan struct{}
	hold    time.Duration
}

func (h *slowOnceHook) PostReadRequest(_ context.Context, r *protocol.Message, _ error) error {
	if r.ServiceMethod != "Sleep" {
		return nil
	}
	h.once.Do(func() {
		close(h.entered)
		time.Sleep(h.hold)
	})
	return nil
}

// TestSlowReadHookKeepsTheLane: a read hook that blocks the lane's
// delivery for longer than the plugin's wait for a missing frame, while
// the lane keeps sending frames, is a slow delivery with frames held
// behind it, not a frame that never arrived: the lane is kept and every
// call behind the hook completes. (The gap timer decided from the next
// sequence number alone and closed the connection "frame N never
// arrived" although frame N was held.)
func TestSlowReadHookKeepsTheLane(t *testing.T) {
	s, p := newServer(t)
	hook := &slowOnceHook{entered: make(chan struct{}), hold: missingFrameTimeout + 700*time.Millisecond}
	s.Plugins.Add(hook)
	addr := serve(t, s)
	// One entry per frame: a burst of calls is a burst of frames.
	c := newClient(t, batchclient.WithBatchCap(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 20*time.Second)

	first := c.Go(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 0, B: 1}, &testsvc.Reply{}, nil)
	select {
	case <-hook.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first call did not reach the read hook")
	}
	// Calls in bursts while the hook holds the delivery, each burst in
	// frames of its own: rpcx hands each frame to a goroutine of its own,
	// so they reach the plugin in any order, and every one is held behind
	// the hook. Bounded by count; Go does not wait for the replies.
	const callers, rounds = 8, 25
	calls := make(chan *client.Call, callers*rounds+1)
	concurrently(t, callers, func(i int) error {
		for j := 0; j < rounds; j++ {
			c.Go(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: j}, &testsvc.Reply{}, calls)
			if j%5 == 4 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		return nil
	})
	for n := 0; n < callers*rounds; n++ {
		select {
		case call := <-calls:
			if call.Error != nil {
				line, _ := rpcxLog.find("closing connection from")
				t.Fatalf("a call held behind the slow hook failed: %v (server: %s)", call.Error, line)
			}
			a := call.Args.(*testsvc.Args)
			require.Equal(t, a.A*a.B, call.Reply.(*testsvc.Reply).C)
		case <-ctx.Done():
			t.Fatalf("%d of %d calls completed", n, callers*rounds)
		}
	}
	<-first.Done
	require.NoError(t, first.Error)
	require.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"), "the lane was closed")
}
