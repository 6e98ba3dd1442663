package batchclient_test

import (
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// waitingForRoom sets up a lane whose queue is full: a server window of 1
// held by a long call, and a queue cap of 59 bytes (one deferred Arith.Mul
// entry is 58), so that of the calls made next one is queued and the rest
// wait in enqueue for room. It returns once the long call runs on the
// server.
func waitingForRoom(t *testing.T) (*batchclient.Client, string) {
	addr, p := startServer(t, false, batchserver.WithWindow(1))
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithQueueLimits(100, 59),
		batchclient.WithReconnect(time.Hour, time.Hour))
	waitConnected(t, c, addr)
	done := make(chan *client.Call, 1)
	c.Go(ctxT(t, 10*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 5000}, &testsvc.Reply{}, done)
	calls := p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 })
	require.Eventually(t, func() bool { return calls.Count() == 1 }, 5*time.Second, time.Millisecond,
		"the long call did not reach the server")
	return c, addr
}

// waitBlocked waits until n callers are on the lane: one queued, the rest
// waiting for room.
func waitBlocked(t *testing.T, c *batchclient.Client, addr string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		w, q := batchclient.RoomWaiters(c, addr)
		return q == 1 && w == n-1
	}, 5*time.Second, time.Millisecond, "the callers did not all reach the full queue")
}

// TestCallsWaitingForRoomWhenLaneFails: calls queued or waiting for queue
// room when Stop tears their lane down return ErrStopped, and each caller
// takes the result the lane handed it (the writers' count of woken
// callers returns to zero).
func TestCallsWaitingForRoomWhenLaneFails(t *testing.T) {
	for range 3 {
		c, addr := waitingForRoom(t)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				err := c.Call(ctxT(t, 10*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 2}, &testsvc.Reply{})
				assert.ErrorIs(t, err, batchclient.ErrStopped)
			})
		}
		waitBlocked(t, c, addr, 4)
		c.Stop(addr)
		wg.Wait()
		require.Zero(t, batchclient.WokenCallers(c))
	}
}

// TestGoWaitingForRoomWhenLaneFails: each Go call queued or waiting for
// queue room when Stop tears its lane down is completed once, with
// ErrStopped.
func TestGoWaitingForRoomWhenLaneFails(t *testing.T) {
	c, addr := waitingForRoom(t)
	done := make(chan *client.Call, 16)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			c.Go(ctxT(t, 10*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 2}, &testsvc.Reply{}, done)
		})
	}
	waitBlocked(t, c, addr, 4)
	c.Stop(addr)
	wg.Wait()
	seen := map[*client.Call]int{}
	for range 4 {
		select {
		case call := <-done:
			assert.ErrorIs(t, call.Error, batchclient.ErrStopped)
			seen[call]++
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 4 calls completed", len(seen))
		}
	}
	// Every Go has returned and Stop has torn the lane down: a second
	// completion of any call would be on the channel by now.
	select {
	case call := <-done:
		t.Fatalf("call %p completed twice (%v)", call, call.Error)
	default:
	}
	assert.Len(t, seen, 4)
}
