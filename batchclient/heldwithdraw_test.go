package batchclient_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Window is a service for the byte-window tests: Hold keeps its frame's
// bytes on the server for a while, Count counts its runs.
type Window struct{ counted *atomic.Int64 }

// Hold sleeps 600 ms, then answers the payload's length.
func (Window) Hold(_ context.Context, b *[]byte, n *int) error {
	time.Sleep(600 * time.Millisecond)
	*n = len(*b)
	return nil
}

// Count counts its run and answers the payload's length.
func (w Window) Count(_ context.Context, b *[]byte, n *int) error {
	w.counted.Add(1)
	*n = len(*b)
	return nil
}

// TestWithdrawnCallHeldByByteWindowIsNotWritten: a Call whose arguments
// the lane's writer has encoded, and then holds back because the byte
// window is full, is not written once its caller has given up (its
// context was cancelled), as a Call still queued is not: the server never runs a
// call its caller has stopped waiting for.
func TestWithdrawnCallHeldByByteWindowIsNotWritten(t *testing.T) {
	const window = 64 << 10
	s := server.NewServer()
	counted := new(atomic.Int64)
	require.NoError(t, s.RegisterName("Window", Window{counted}, ""))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s, batchserver.WithWindowBytes(window), batchserver.WithPoolSize(1))
	require.NoError(t, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 20*time.Second)

	// 48 KiB held on the server for 600 ms: 16 KiB of the window left.
	hold := make([]byte, 48<<10)
	first := c.Go(ctx, addr, "Window", "Hold", &hold, new(int), nil)
	deadline := time.Now().Add(5 * time.Second)
	for batchclient.BytesInFlight(c, addr) < 48<<10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.GreaterOrEqual(t, batchclient.BytesInFlight(c, addr), int64(48<<10))

	// 32 KiB does not fit: the writer encodes it (there is room for its
	// start) and holds it back until the window has room.
	held := make([]byte, 32<<10)
	// Cancelled, not timed out: an entry past its deadline is refused by
	// the server anyway; one whose caller cancelled has none.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(150*time.Millisecond, cancel)
	err = c.Call(cctx, addr, "Window", "Count", &held, new(int))
	cancel()
	require.True(t, errors.Is(err, context.Canceled), "the held call: %v", err)

	<-first.Done
	require.NoError(t, first.Error)
	// Anything the writer still had is written by now: a later call on
	// the only lane is answered after it.
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.Zero(t, counted.Load(), "the server ran a call whose caller had given up while the byte window held it")
}
