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
	"github.com/rpcxbatch/rpcxbatch/internal/testsvc"
)

// waitingForRoom sets up a lane whose queue is full: a server window of 1
// held by a long call, and a queue cap of 59 bytes (one deferred Arith.Mul
// entry is 58), so that of the calls made next one is queued and the rest
// wait in enqueue for room.
func waitingForRoom(t *testing.T) (*batchclient.Client, string) {
	addr, _ := startServer(t, false, batchserver.WithWindow(1))
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithQueueLimits(100, 59),
		batchclient.WithReconnect(time.Hour, time.Hour))
	waitConnected(t, c, addr)
	done := make(chan *client.Call, 1)
	c.Go(ctxT(t, 10*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 5000}, &testsvc.Reply{}, done)
	time.Sleep(50 * time.Millisecond)
	return c, addr
}

// TestCallsWaitingForRoomWhenLaneFails: calls waiting for queue room when
// their lane fails return its error, and each caller takes the result the
// lane handed it (the writers' count of woken callers returns to zero).
func TestCallsWaitingForRoomWhenLaneFails(t *testing.T) {
	for range 3 {
		c, addr := waitingForRoom(t)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				err := c.Call(ctxT(t, 10*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 2}, &testsvc.Reply{})
				assert.Error(t, err)
			})
		}
		time.Sleep(50 * time.Millisecond)
		c.Stop(addr)
		wg.Wait()
		require.Zero(t, batchclient.WokenCallers(c))
	}
}

// TestGoWaitingForRoomWhenLaneFails: each Go call waiting for queue room
// when its lane fails is completed once, with an error.
func TestGoWaitingForRoomWhenLaneFails(t *testing.T) {
	c, addr := waitingForRoom(t)
	done := make(chan *client.Call, 16)
	for range 4 {
		go c.Go(ctxT(t, 10*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 2}, &testsvc.Reply{}, done)
	}
	time.Sleep(50 * time.Millisecond)
	c.Stop(addr)
	seen := map[*client.Call]int{}
	for range 4 {
		select {
		case call := <-done:
			assert.Error(t, call.Error)
			seen[call]++
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 4 calls completed", len(seen))
		}
	}
	// A second completion of any of them would arrive now.
	select {
	case call := <-done:
		t.Fatalf("call %p completed twice (%v)", call, call.Error)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Len(t, seen, 4)
}
