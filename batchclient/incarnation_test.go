package batchclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// mulOf decodes an Arith.Mul entry's arguments.
func mulOf(t *testing.T, e codec.Entry) testsvc.Args {
	var a testsvc.Args
	if err := msgpackDecode(e.Payload, &a); err != nil {
		t.Errorf("entry %d: %v", e.ID, err)
	}
	return a
}

// TestStaleIncarnationReplyDropped: a reply frame carrying another
// incarnation than the lane's handshake never reaches a call, even one
// whose id it names; it is counted in errors.stale_incarnation, and the
// call takes the reply of its own incarnation that follows.
func TestStaleIncarnationReplyDropped(t *testing.T) {
	addr := startScripted(t, func(entries []codec.Entry, reply func(uint64, ...codec.Reply)) {
		stale := make([]codec.Reply, 0, len(entries))
		good := make([]codec.Reply, 0, len(entries))
		for _, e := range entries {
			a := mulOf(t, e)
			stale = append(stale, codec.Reply{ID: e.ID, Payload: msgpackOf(testsvc.Reply{C: -1})})
			good = append(good, codec.Reply{ID: e.ID, Payload: msgpackOf(testsvc.Reply{C: a.A * a.B})})
		}
		reply(scriptedIncarnation+1, stale...)
		reply(scriptedIncarnation, good...)
	})
	c := newClient(t, batchclient.WithReconnect(time.Hour, time.Hour))
	in := waitConnected(t, c, addr)
	require.Equal(t, uint64(scriptedIncarnation), in.Incarnation)
	staleCount := c.Metrics().Get("rpcxbatch.client.errors.stale_incarnation").(interface{ Count() int64 })

	for i := 1; i <= 20; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: i, B: 7}, &r))
		require.Equal(t, 7*i, r.C, "call %d took a stale reply", i)
	}
	// Go calls: the reader completes them.
	done := make(chan *client.Call, 20)
	for i := 1; i <= 20; i++ {
		c.Go(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: i, B: 11}, &testsvc.Reply{}, done)
	}
	for range 20 {
		call := <-done
		require.NoError(t, call.Error)
		a := call.Args.(*testsvc.Args)
		require.Equal(t, 11*a.A, call.Reply.(*testsvc.Reply).C, "Go call %d took a stale reply", a.A)
	}
	assert.GreaterOrEqual(t, staleCount.Count(), int64(21), "stale reply frames not counted")
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status, "a stale reply frame tore the lane down")
}

// TestLateReplyDropped: when a call's context ends first, Call returns the
// context's error at once; the reply that comes later is dropped, and it
// reaches no other call, neither one in flight nor one made after.
func TestLateReplyDropped(t *testing.T) {
	held := make(chan codec.Entry, 16)
	addr := startScripted(t, func(entries []codec.Entry, reply func(uint64, ...codec.Reply)) {
		for _, e := range entries {
			a := mulOf(t, e)
			if a.B == 0 {
				held <- e // answered later, out of turn
				continue
			}
			rs := []codec.Reply{{ID: e.ID, Payload: msgpackOf(testsvc.Reply{C: a.A * a.B})}}
			// Every held reply goes out first, late, in the same frame.
			for {
				select {
				case h := <-held:
					rs = append([]codec.Reply{{ID: h.ID, Payload: msgpackOf(testsvc.Reply{C: -1})}}, rs...)
					continue
				default:
				}
				break
			}
			reply(scriptedIncarnation, rs...)
		}
	})
	c := newClient(t, batchclient.WithReconnect(time.Hour, time.Hour))
	waitConnected(t, c, addr)

	for i := 1; i <= 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		var late testsvc.Reply
		start := time.Now()
		err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 0}, &late)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), 5*time.Second, "Call did not return when its context ended")

		// The next call's frame brings the late reply, then its own.
		var r testsvc.Reply
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: i, B: 13}, &r))
		require.Equal(t, 13*i, r.C, "call %d took the late reply of another", i)
		assert.Zero(t, late.C, "the late reply was decoded into the caller's value after Call returned")
	}
	require.Zero(t, batchclient.WokenCallers(c))
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
}
