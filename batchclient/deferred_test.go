package batchclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// panicArgs are arguments whose encoder panics.
type panicArgs struct{}

func (panicArgs) EncodeMsgpack(*msgpack.Encoder) error { panic("bad argument type") }

// TestCallArgumentsThatDoNotEncode: Call's arguments are encoded by the
// lane's writer; arguments the codec fails on, or panics on, fail only
// their own call with ErrEncode, and the lane goes on.
func TestCallArgumentsThatDoNotEncode(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 5*time.Second)
	var r testsvc.Reply

	err := c.Call(ctx, addr, "Arith", "Mul", make(chan int), &r)
	require.ErrorIs(t, err, batchclient.ErrEncode)
	err = c.Call(ctx, addr, "Arith", "Mul", panicArgs{}, &r)
	require.ErrorIs(t, err, batchclient.ErrEncode)
	assert.Contains(t, err.Error(), "bad argument type")
	assert.Equal(t, int64(2), c.Metrics().Get("rpcxbatch.client.errors.codec").(interface{ Count() int64 }).Count())

	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 5}, &r))
	assert.Equal(t, 20, r.C)
}

// TestCastAndGoArgumentsThatDoNotEncode: Go and Cast encode on the
// caller; arguments the codec fails on or panics on return ErrEncode to
// that caller (no panic), and give back their place in the queue: with a
// queue of 2 entries and fail-fast overflow, a leaked place would make the
// later casts fail with ErrOverloaded.
func TestCastAndGoArgumentsThatDoNotEncode(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithQueueLimits(2, 1<<20),
		batchclient.WithOverflow(batchclient.OverflowFailFast))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 5*time.Second)
	for range 5 {
		require.ErrorIs(t, c.Cast(ctx, addr, "Arith", "Mul", panicArgs{}), batchclient.ErrEncode)
		require.ErrorIs(t, c.Cast(ctx, addr, "Arith", "Mul", make(chan int)), batchclient.ErrEncode)
		call := c.Go(ctx, addr, "Arith", "Mul", panicArgs{}, &testsvc.Reply{}, nil)
		require.ErrorIs(t, call.Error, batchclient.ErrEncode)
		assert.Contains(t, call.Error.Error(), "bad argument type")
	}
	assert.Equal(t, int64(15), c.Metrics().Get("rpcxbatch.client.errors.codec").(interface{ Count() int64 }).Count())
	var r testsvc.Reply
	require.NoError(t, c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 2}))
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 5}, &r))
	assert.Equal(t, 20, r.C)
}

// TestCallsBiggerThanCountedSplitFrames: a queue of calls is taken for a
// frame before their arguments are encoded; when they turn out bigger than
// the frame cap, they go out as several frames (each within both sides'
// caps: the server closes the connection on a bigger one), and every call
// gets its reply.
func TestCallsBiggerThanCountedSplitFrames(t *testing.T) {
	const frameCap = 64 << 10
	addr, p := startServer(t, false, batchserver.WithMaxFrameBytes(frameCap))
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithMaxFrameBytes(frameCap))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 10*time.Second)

	const n = 60
	concurrently(t, n, func(i int) error {
		in := make([]byte, 10<<10)
		in[0] = byte(i)
		var out []byte
		err := c.Call(ctx, addr, "Echo", "Bytes", &in, &out)
		if err == nil && (len(out) != len(in) || out[0] != byte(i)) {
			err = errors.New("wrong reply")
		}
		return err
	})
	frames := p.Metrics().Get("rpcxbatch.server.frames").(interface{ Count() int64 }).Count()
	assert.GreaterOrEqual(t, frames, int64(n*(10<<10)/frameCap), "600 KiB of calls in frames of at most 64 KiB")
	assert.Equal(t, int64(0), p.Metrics().Get("rpcxbatch.server.errors.malformed").(interface{ Count() int64 }).Count())
}

// TestCallsEndingWhileQueued: calls whose contexts end while they wait in
// the queue or are being encoded return their context's error, their
// callers may change the arguments at once (the race detector watches the
// writer), and the places they held in the lane's window come back: with a
// window of 32, thousands of such calls leave the lane working.
func TestCallsEndingWhileQueued(t *testing.T) {
	addr, _ := startServer(t, false, batchserver.WithWindow(32))
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)

	const callers, rounds = 200, 20
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := testsvc.NewData(i)
			var reply testsvc.Data
			for j := 0; j < rounds; j++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(j%4)*100*time.Microsecond)
				err := c.Call(ctx, addr, "Echo", "Data", args, &reply)
				cancel()
				if err == nil {
					assert.Equal(t, *args, reply)
				} else {
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				}
				args.A.F0++ // the caller owns its arguments again
			}
		}()
	}
	wg.Wait()
	// Every caller handed a result took it: the writer's settling has no
	// callers left to wait for.
	assert.Zero(t, batchclient.WokenCallers(c))

	// Every place in the window came back.
	ctx := ctxT(t, 5*time.Second)
	for i := 0; i < 100; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r))
		require.Equal(t, 2*i, r.C)
	}
}
