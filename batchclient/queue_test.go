package batchclient_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// stuckServer answers the handshake like a batch server and then never
// reads again, so a client's lane fills the socket buffers and its writer
// blocks: the queue behind it fills up.
func stuckServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
			msg, _, err := codec.ReadMessage(conn, 1<<20, nil)
			if err != nil {
				return
			}
			h := msg.Header
			h.SetMessageType(protocol.Response)
			hs := codec.Handshake{Version: codec.Version, PoolSize: 1, BatchCap: 1000, MaxFrameBytes: 16 << 20, Incarnation: 7, Window: 1 << 20}
			conn.Write(codec.AppendMessage(nil, &h, msg.ServicePath, msg.ServiceMethod, nil, codec.AppendHandshake(nil, &hs)))
		}
	}()
	return ln.Addr().String()
}

// fillUntil casts 1 MiB payloads until one fails, bounded in count.
func fillUntil(t *testing.T, c *batchclient.Client, addr string, ctxFor func() (context.Context, context.CancelFunc)) error {
	big := make([]byte, 1<<20)
	for i := 0; i < 2000; i++ {
		ctx, cancel := ctxFor()
		err := c.Cast(ctx, addr, "Echo", "Bytes", &big)
		cancel()
		if err != nil {
			return err
		}
	}
	t.Fatal("the queue never filled")
	return nil
}

func TestOverflowFailFast(t *testing.T) {
	addr := stuckServer(t)
	c := newClient(t, batchclient.WithQueueLimits(4, 64<<20), batchclient.WithOverflow(batchclient.OverflowFailFast),
		batchclient.WithHeartbeat(10*time.Second, 20*time.Second))
	waitConnected(t, c, addr)
	err := fillUntil(t, c, addr, func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 10*time.Second)
	})
	require.ErrorIs(t, err, batchclient.ErrOverloaded)
}

func TestOverflowBlockReturnsAtDeadline(t *testing.T) {
	addr := stuckServer(t)
	c := newClient(t, batchclient.WithQueueLimits(4, 64<<20), batchclient.WithHeartbeat(10*time.Second, 20*time.Second))
	waitConnected(t, c, addr)
	var started time.Time
	err := fillUntil(t, c, addr, func() (context.Context, context.CancelFunc) {
		started = time.Now()
		return context.WithTimeout(context.Background(), 200*time.Millisecond)
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	waited := time.Since(started)
	assert.GreaterOrEqual(t, waited, 150*time.Millisecond)
	// The stuck server never makes room: without the deadline the caller
	// would wait for good. Generous for -race on 2 busy cores.
	assert.Less(t, waited, 5*time.Second)
}

// An entry larger than the frame cap goes as a plain rpcx request, as
// rpcx would send it (a call, Go or a cast); a send, which has no rpcx
// form, fails with ErrTooLarge.
func TestEntryLargerThanFrameCap(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithMaxFrameBytes(64<<10))
	waitConnected(t, c, addr)
	big := make([]byte, 100<<10)
	var out []byte
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Bytes", &big, &out))
	assert.Len(t, out, 100<<10)
	call := c.Go(ctxT(t, 5*time.Second), addr, "Echo", "Bytes", &big, new([]byte), nil)
	<-call.Done
	require.NoError(t, call.Error)
	assert.Len(t, *call.Reply.(*[]byte), 100<<10)
	require.NoError(t, c.Cast(ctxT(t, 5*time.Second), addr, "Echo", "Bytes", &big))
	require.ErrorIs(t, c.Send(ctxT(t, 5*time.Second), addr, "sink", big), batchclient.ErrTooLarge)
	small := make([]byte, 10<<10)
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Bytes", &small, &out))
	assert.Len(t, out, 10<<10)
}

func TestInfoStartStop(t *testing.T) {
	addr, p := startServer(t, false)
	c := newClient(t)
	assert.Equal(t, batchclient.NotConnected, c.Info(addr).Status)
	in := waitConnected(t, c, addr)
	assert.Equal(t, batchclient.Connected, in.Status)
	assert.Equal(t, 1, in.Lanes)
	assert.Positive(t, p.Options().PoolSize)

	c.Stop(addr)
	c.Stop(addr) // idempotent
	assert.Equal(t, batchclient.NotConnected, c.Info(addr).Status)
	// A stopped address takes the plain path.
	before := counter(t, p, "rpcxbatch.server.calls")
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 3}, &r))
	assert.Equal(t, 9, r.C)
	assert.Equal(t, before, counter(t, p, "rpcxbatch.server.calls"))
	err := c.Send(ctxT(t, time.Second), addr, "x", nil)
	require.ErrorIs(t, err, batchclient.ErrNotBatchPeer)

	in = waitConnected(t, c, addr)
	assert.Equal(t, batchclient.Connected, in.Status)
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 3}, &r))
	assert.Equal(t, before+1, counter(t, p, "rpcxbatch.server.calls"))
}

func TestUnreachableIsPeerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t)
	var r testsvc.Reply
	err = c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{}, &r)
	require.ErrorIs(t, err, batchclient.ErrPeerDown)
	assert.Equal(t, batchclient.Down, c.Info(addr).Status)
	assert.Error(t, c.Info(addr).Err)
}

func TestGoCancelledByContext(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithCancel(context.Background())
	call := c.Go(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 5000, B: 1}, &testsvc.Reply{}, nil)
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case <-call.Done:
		require.ErrorIs(t, call.Error, context.Canceled)
		assert.Less(t, time.Since(start), 3*time.Second) // the handler sleeps 5 s
	case <-time.After(4500 * time.Millisecond):
		t.Fatal("Go did not honour its context")
	}
	// A Go call that completes normally.
	call = c.Go(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 5, B: 5}, &testsvc.Reply{}, make(chan *client.Call, 1))
	<-call.Done
	require.NoError(t, call.Error)
	assert.Equal(t, 25, call.Reply.(*testsvc.Reply).C)
}

func TestClosedClient(t *testing.T) {
	addr, _ := startServer(t, false)
	c, err := batchclient.New()
	require.NoError(t, err)
	waitConnected(t, c, addr)
	require.NoError(t, c.Close())
	err = c.Call(ctxT(t, time.Second), addr, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{})
	require.True(t, errors.Is(err, batchclient.ErrClosed), err)
}

// An address that stays down and that no call asks for is forgotten: the
// client stops redialling it, and a later call starts afresh.
func TestDownPeerForgotten(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, batchclient.WithForgetDown(200*time.Millisecond), batchclient.WithReconnect(20*time.Millisecond, 50*time.Millisecond))
	require.NoError(t, c.Start(addr))
	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.Down }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.NotConnected }, 5*time.Second, 10*time.Millisecond)

	// The address comes back: the next call connects again.
	startServerAt(t, addr)
	var r testsvc.Reply
	require.Eventually(t, func() bool {
		return c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 5}, &r) == nil
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, 10, r.C)
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
}

// A reply larger than the frames this client reads comes alone in a frame
// of its own, as rpcx moves a response of any size; the lanes stay up.
func TestReplyLargerThanClientCap(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithMaxFrameBytes(256<<10))
	in := waitConnected(t, c, addr)
	n := 1 << 20
	var out []byte
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Grow", &n, &out))
	assert.Len(t, out, n)
	n = 100 << 10
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Grow", &n, &out))
	assert.Len(t, out, n)
	assert.Equal(t, in, c.Info(addr), "the lanes were not torn down")
}
