package lane

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// A client that makes both synchronous Calls (their
// arguments encoded by the writer) and casts or Go calls (encoded by
// their callers) shares one pool of entries between the two; the lock
// layer does, Acquire by Call and Release, Abort, Drop by Go. A cast
// made after a Call must find a payload buffer in the pooled entry, as
// it did before the argument buffers: otherwise every cast or Go of a
// mixed load allocates one, and the buffers the casts bring into the
// pool drain into the writer's argBufs (kept there, or dropped once
// those are full).
//
// The measure is the heap allocations of a cast's Submit and write,
// made right after a Call (mixed) and right after another cast (casts
// only), in one process on one P so that the pool hands back the entry
// last put.
func TestCastAfterCallAllocatesNoMoreThanAfterCast(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l, _ := quietTestLane(t) // the peer reads nothing: the frames fit its socket's buffers
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	payload := bytes.Repeat([]byte{'p'}, 200)

	writeQueued := func() {
		if l.queued() > 0 {
			require.True(t, l.acquireSocket())
			require.NoError(t, l.flush(&l.ws, time.Time{}, -1))
			l.releaseSocket()
		}
	}
	call := func() {
		done := make(chan *client.Call, 1)
		pc := &Pending{Call: &client.Call{ServicePath: "Echo", ServiceMethod: "Bytes", Args: payload, Done: done}}
		_, d, err := l.Submit(ctx, codec.KindCall, pc, true)
		require.NoError(t, err)
		writeQueued()
		d.Withdraw() // as Client.Call does once its call is over
	}
	var ms runtime.MemStats
	mallocs := func() uint64 { runtime.ReadMemStats(&ms); return ms.Mallocs }
	// cast submits and writes one cast and returns the heap allocations
	// it made.
	cast := func() uint64 {
		pc := &Pending{Call: &client.Call{ServicePath: "Echo", ServiceMethod: "Cast", Args: payload}}
		before := mallocs()
		_, _, err := l.Submit(ctx, codec.KindCast, pc, false)
		require.NoError(t, err)
		writeQueued()
		return mallocs() - before
	}

	const rounds = 200
	for range 5 { // warm: the writer's frame buffer, the pool
		call()
		cast()
	}
	var afterCast, afterCall uint64
	for range rounds {
		cast()
		afterCast += cast()
		call()
		afterCall += cast()
	}
	t.Logf("allocations per cast: after a cast %.2f, after a call %.2f",
		float64(afterCast)/rounds, float64(afterCall)/rounds)
	require.LessOrEqual(t, float64(afterCall)/rounds, float64(afterCast)/rounds+0.5,
		"a cast made after a Call allocates more than one made after a cast: the Call's entry came back to the pool without its payload buffer")
}
