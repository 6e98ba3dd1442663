package lane

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// TestWrittenCallHandsItsArgumentBufferOn: once a Call entry's payload is
// in a frame, the entry (its caller's until the reply comes) no longer
// holds the buffer its arguments were encoded into; the next Call entry
// encodes into that same buffer, whether its caller writes the frame (the
// first call here) or the writer does (the second). Callers waiting for replies then hold no
// encodings, and the few buffers in use stay in cache.
func TestWrittenCallHandsItsArgumentBufferOn(t *testing.T) {
	l, peer := quietTestLane(t)
	msgs := peer.read(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(arg string) Deferred {
		done := make(chan *client.Call, 1)
		pc := &Pending{Call: &client.Call{ServicePath: "Echo", ServiceMethod: "Bytes", Args: []byte(arg), Done: done}}
		_, d, err := l.Submit(ctx, codec.KindCall, pc, true)
		require.NoError(t, err)
		t.Cleanup(d.Withdraw)
		if l.queued() > 0 {
			// Not written by its caller (the call before is unanswered):
			// the writer's round, as writeLoop runs it.
			require.True(t, l.acquireSocket())
			require.NoError(t, l.flush(&l.ws, time.Time{}, -1))
			l.releaseSocket()
		}
		select {
		case m := <-msgs:
			require.Contains(t, m, "call")
		case <-time.After(20 * time.Second):
			t.Fatalf("the peer read no frame; caller frames %d, queued %d", l.CallerFrames(), l.queued())
		}
		return d
	}

	first := call("the first call's arguments")
	require.Nil(t, first.e.buf, "a written call's entry still holds its argument buffer")
	require.Len(t, l.ws.argBufs.bufs, 1, "the buffer kept for the next call")
	kept := unsafe.SliceData(l.ws.argBufs.bufs[0])

	second := call("the second")
	require.Nil(t, second.e.buf)
	require.Len(t, l.ws.argBufs.bufs, 1)
	require.Equal(t, kept, unsafe.SliceData(l.ws.argBufs.bufs[0]), "the second call encoded into another buffer")
}

// argBufs keeps buffers within its bounds: none over maxKeptPayload, at
// most maxArgBufs of them and maxArgBufBytes in all.
func TestArgBufsBounded(t *testing.T) {
	var a argBufs
	a.put(make([]byte, 10, maxKeptPayload+1))
	require.Empty(t, a.bufs, "a buffer larger than a pooled entry keeps")
	for range maxArgBufs + 10 {
		a.put(make([]byte, 0, 64))
	}
	require.Len(t, a.bufs, maxArgBufs)
	var b argBufs
	for range maxArgBufs {
		b.put(make([]byte, 0, maxKeptPayload))
	}
	require.LessOrEqual(t, b.bytes, maxArgBufBytes)
	require.Len(t, b.bufs, maxArgBufBytes/maxKeptPayload)
	got := b.get()
	require.Zero(t, len(got))
	require.Equal(t, maxKeptPayload, cap(got))
	require.Equal(t, maxArgBufBytes-maxKeptPayload, b.bytes)
}
