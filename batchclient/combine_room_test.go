package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The queue's bytes and a caller's own frame: the entries a frame holds
// count against QueueBytes until they are written (so that a writer stuck
// on a stuck peer holds no more than the bound). A caller that writes its
// own frame on a quiet lane must let go of them once written, as the
// writer does; otherwise the next caller whose entry does not fit beside
// them waits for room nobody gives back (OverflowBlock) or is refused
// (OverflowFailFast), and a call is lost on a healthy lane.

// TestCallerFrameGivesQueueBytesBack: one caller, calls one after another
// on a quiet lane (each writes its own frame), with a queue whose byte
// bound holds one queued call entry but not two. Every call must get its
// reply: under FailFast none may be refused as overloaded, under Block
// none may wait for room.
func TestCallerFrameGivesQueueBytesBack(t *testing.T) {
	// A call entry as the queue counts it before the writer encodes its
	// arguments (a deferred entry: no payload yet).
	size := codec.EntrySize(&codec.Entry{Kind: codec.KindCall, ServicePath: "Arith", ServiceMethod: "Mul",
		SerializeType: uint8(protocol.MsgPack)})
	for _, tc := range []struct {
		name   string
		policy batchclient.Overflow
	}{{"failfast", batchclient.OverflowFailFast}, {"block", batchclient.OverflowBlock}} {
		t.Run(tc.name, func(t *testing.T) {
			batchclient.SetCombining(t, true)
			addr, _ := startServer(t, false)
			c := newClient(t, batchclient.WithLanes(1), batchclient.WithQueueLimits(64, size*3/2),
				batchclient.WithOverflow(tc.policy))
			waitConnected(t, c, addr)
			const n = 50
			for i := 0; i < n; i++ {
				// Generous for a loaded machine; a call left waiting for
				// room ends here.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var r testsvc.Reply
				err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r)
				cancel()
				require.NoError(t, err, "call %d of %d on a quiet lane", i+1, n)
				require.Equal(t, 3*i, r.C)
			}
			require.Positive(t, batchclient.CallerFrames(c, addr), "no caller wrote its own frame: the test did not test that")
		})
	}
}

// TestQuietLaneFirstCallsTogether: the first calls on a fresh lane, made at
// the same moment, as TestLaneDrain makes them. Admission reserves the
// whole queue's bytes for a lane's very first entry (nothing queued yet to
// guess its size from), so a second caller that comes while the first
// holds that reservation waits for the queue to be empty, its bytes in
// write included. With the first caller writing its own frame, those bytes
// must be given back when its write ends, else the second call waits for
// ever (its frame never written: the server never sees it). The race is
// narrow; a fresh client per round, at most 150 rounds or 40 s.
func TestQuietLaneFirstCallsTogether(t *testing.T) {
	batchclient.SetCombining(t, true)
	addr, _ := startServer(t, false)
	const rounds, callers = 150, 2
	stop := time.Now().Add(40 * time.Second)
	for round := 0; round < rounds && time.Now().Before(stop); round++ {
		if err := firstCallsTogether(t, addr, callers); err != nil {
			t.Fatalf("round %d: %v", round+1, err)
		}
	}
}

// firstCallsTogether makes callers calls at once on a fresh client's only
// lane and waits for them, at most 5 s each.
func firstCallsTogether(t *testing.T, addr string, callers int) error {
	c, err := batchclient.New(batchclient.WithLanes(1))
	require.NoError(t, err)
	defer c.Close()
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := make(chan struct{})
	errs := make(chan error, callers)
	for i := 0; i < callers; i++ {
		go func() {
			<-start
			var r testsvc.Reply
			err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 7}, &r)
			if err == nil && r.C != 7*i {
				err = fmt.Errorf("call %d: reply %d", i, r.C)
			}
			errs <- err
		}()
	}
	close(start)
	var all error
	for i := 0; i < callers; i++ {
		if err := <-errs; err != nil {
			all = errors.Join(all, err)
		}
	}
	return all
}
