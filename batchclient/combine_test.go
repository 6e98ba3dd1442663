package batchclient_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestQuietLaneCallerWritesItsFrame: a caller of Call that finds its lane
// quiet (nothing queued, the writer idle, nobody else on the way) writes
// its frame itself instead of handing it to the lane's writer, as plain
// rpcx's caller writes its request; the replies are the same. Combining
// is on by default: this test leaves it as it is.
func TestQuietLaneCallerWritesItsFrame(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 20*time.Second)
	const n = 200
	before := batchclient.CallerFrames(c, addr)
	for i := 0; i < n; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r))
		require.Equal(t, 3*i, r.C)
	}
	// A heartbeat or a slow reader may take a turn now and then; one
	// caller alone finds its lane quiet nearly every time.
	got := batchclient.CallerFrames(c, addr) - before
	require.GreaterOrEqual(t, got, int64(n/2), "frames written by their callers")
}

// TestCallerFramesUnderMixedLoad: calls that write their own frames, calls
// the writer batches, and keyed casts and sends, all on one lane at once:
// every call gets its own reply and every key's sends arrive in order
// (the socket has one owner at a time, and whoever owns it takes the
// queue in order).
func TestCallerFramesUnderMixedLoad(t *testing.T) {
	batchclient.SetCombining(t, true)
	addr, p := startServer(t, false)
	const keys, perKey = 4, 200
	var mu sync.Mutex
	got := map[string][]int{}
	require.NoError(t, p.HandleSend("seq", func(_ context.Context, b []byte) {
		var k string
		var i int
		fmt.Sscanf(string(b), "%s %d", &k, &i)
		mu.Lock()
		got[k] = append(got[k], i)
		mu.Unlock()
	}))
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)
	concurrently(t, 40+keys, func(g int) error {
		if g >= 40 {
			k := fmt.Sprintf("k%d", g)
			kctx := batchclient.WithKey(ctx, k)
			for i := 0; i < perKey; i++ {
				if err := c.Send(kctx, addr, "seq", []byte(fmt.Sprintf("%s %d", k, i))); err != nil {
					return err
				}
				// A call between sends: it may write the queued sends itself.
				var r testsvc.Reply
				if err := c.Call(kctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r); err != nil {
					return err
				}
				if r.C != 2*i {
					return fmt.Errorf("key %s call %d: reply %d", k, i, r.C)
				}
			}
			return nil
		}
		for i := 0; i < 100; i++ {
			var r testsvc.Reply
			if err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: g*1000 + i, B: 3}, &r); err != nil {
				return err
			}
			if r.C != 3*(g*1000+i) {
				return fmt.Errorf("caller %d call %d: reply %d", g, i, r.C)
			}
			if i%10 == 0 {
				if err := c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, s := range got {
			n += len(s)
		}
		mu.Unlock()
		if n == keys*perKey {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d sends arrived", n, keys*perKey)
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, s := range got {
		for i, v := range s {
			require.Equal(t, i, v, "key %s: send %d arrived as %d", k, i, v)
		}
	}
}

// TestCallerFrameOnStuckPeerEndsAtDeadline: a caller writing its own frame
// to a peer that stops reading does not hang in the write: it leaves the
// frame's end to the lane's writer and returns at its context's deadline,
// as a call handed to the writer does. Once the peer reads again, the
// writer has finished the frame whole: the lane goes on serving.
func TestCallerFrameOnStuckPeerEndsAtDeadline(t *testing.T) {
	batchclient.SetCombining(t, true)
	backend, _ := startServer(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	px := &gateProxy{ln: ln, done: make(chan struct{})}
	t.Cleanup(func() { close(px.done) })
	go px.run(t, backend)
	addr := ln.Addr().String()

	// Heartbeats far apart: the stuck peer is not judged frozen here.
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithHeartbeat(20*time.Second, time.Minute))
	waitConnected(t, c, addr)
	var out []byte
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Echo", "Bytes", []byte("x"), &out))
	before := batchclient.CallerFrames(c, addr)

	// The peer stops reading; a frame larger than the sockets' buffers
	// cannot be taken whole.
	px.c2sPaused.Store(true)
	big := bytes.Repeat([]byte("b"), 12<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err = c.Call(ctx, addr, "Echo", "Bytes", big, &out)
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Generous for -race on 2 busy cores; the write alone would wait for
	// the peer for ever.
	require.Less(t, took, 5*time.Second, "the caller hung in its write")
	require.Equal(t, before+1, batchclient.CallerFrames(c, addr), "the caller wrote its frame itself")

	px.c2sPaused.Store(false)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 20*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	require.Equal(t, 42, r.C)
}
