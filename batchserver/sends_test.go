package batchserver_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// TestSendsArriveInOrderPerKey: 100 senders, each with its own key, send
// 1,000 sends each; every one arrives exactly once, and per key in the order
// it was sent.
func TestSendsArriveInOrderPerKey(t *testing.T) {
	const keys, perKey = 100, 1000
	addr, _, p := startServer(t)

	var (
		mu       sync.Mutex
		got      = make([][]uint32, keys)
		bad      []string
		received atomic.Int64
	)
	require.NoError(t, p.HandleSend("seq", func(_ context.Context, payload []byte) {
		defer received.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if len(payload) != 8 {
			bad = append(bad, fmt.Sprintf("payload of %d bytes", len(payload)))
			return
		}
		k, n := binary.BigEndian.Uint32(payload), binary.BigEndian.Uint32(payload[4:])
		if k >= keys {
			bad = append(bad, fmt.Sprintf("key %d", k))
			return
		}
		got[k] = append(got[k], n)
	}))
	err := p.HandleSend("seq", func(context.Context, []byte) {})
	require.ErrorIs(t, err, batchserver.ErrSendHandlerExists)

	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)
	concurrently(t, keys, func(k int) error {
		kctx := batchclient.WithKey(ctx, fmt.Sprintf("sender-%d", k))
		for n := 0; n < perKey; n++ {
			var b [8]byte
			binary.BigEndian.PutUint32(b[:], uint32(k))
			binary.BigEndian.PutUint32(b[4:], uint32(n))
			if err := c.Send(kctx, addr, "seq", b[:]); err != nil {
				return fmt.Errorf("key %d send %d: %w", k, n, err)
			}
		}
		return nil
	})

	const total = keys * perKey
	if !eventually(30*time.Second, func() bool { return received.Load() >= total }) {
		t.Fatalf("only %d of %d sends arrived within 30 s", received.Load(), total)
	}
	// Anything extra (a doubled entry) would arrive right behind the rest.
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, int64(total), received.Load(), "sends delivered more than once")

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, bad)
	for k := 0; k < keys; k++ {
		seq := got[k]
		require.Len(t, seq, perKey, "key %d", k)
		for i, n := range seq {
			if n != uint32(i) {
				t.Fatalf("key %d: position %d holds send %d (want %d); sends missing, doubled or out of order", k, i, n, i)
			}
		}
	}
	require.Equal(t, int64(total), counter(t, p.Metrics(), "rpcxbatch.server.sends"))
}

// TestSlowSendHandlerKeepsTheLane: a send handler that is slow for a while
// only delays the later entries of its lane (as HandleSend documents); the
// frames that pile up behind it meanwhile must not get the lane's
// connection closed, and every send still arrives once, in order.
func TestSlowSendHandlerKeepsTheLane(t *testing.T) {
	const total = 6000
	addr, _, p := startServer(t)
	release := make(chan struct{})
	var (
		mu   sync.Mutex
		got  []uint32
		once sync.Once
	)
	require.NoError(t, p.HandleSend("slow", func(_ context.Context, payload []byte) {
		once.Do(func() {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		})
		mu.Lock()
		got = append(got, binary.BigEndian.Uint32(payload))
		mu.Unlock()
	}))
	// One entry per frame, so that the frames behind the slow entry are many.
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithBatchCap(1))
	waitConnected(t, c, addr)
	ctx := batchclient.WithKey(ctxT(t, 20*time.Second), "k")
	for i := 0; i < total; i++ {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		require.NoError(t, c.Send(ctx, addr, "slow", b[:]))
	}
	// Let the frames reach the server while the first send is still held.
	m := p.Metrics()
	queued := eventually(10*time.Second, func() bool {
		return counter(t, m, "rpcxbatch.server.frames") >= total-1 || counter(t, m, "rpcxbatch.server.errors.malformed") > 0
	})
	require.True(t, queued, "only %d of %d frames reached the server while the first send was held",
		counter(t, m, "rpcxbatch.server.frames"), total)
	close(release)

	done := eventually(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= total || counter(t, m, "rpcxbatch.server.errors.malformed") > 0
	})
	mu.Lock()
	n := len(got)
	mu.Unlock()
	require.Zero(t, counter(t, m, "rpcxbatch.server.errors.malformed"),
		"the server closed a well-behaved lane because frames queued up behind a slow send handler")
	require.True(t, done && n == total, "%d of %d sends arrived", n, total)
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		require.Equal(t, uint32(i), v)
	}
}
