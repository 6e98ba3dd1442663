package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

func TestCallOverBatchPath(t *testing.T) {
	addr, p := startServer(t, false)
	c := newClient(t)
	in := waitConnected(t, c, addr)
	require.Equal(t, batchclient.Connected, in.Status)
	require.Equal(t, 1, in.Lanes, "a pool starts with one lane and grows only under load")
	require.Equal(t, p.Incarnation(), in.Incarnation)

	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	assert.Equal(t, 42, r.C)

	var d testsvc.Data
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Data", testsvc.NewData(3), &d))
	assert.Equal(t, *testsvc.NewData(3), d)
	assert.Equal(t, int64(2), p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 }).Count())
}

func TestServiceErrorsMatchPlainRPCX(t *testing.T) {
	batchAddr, _ := startServer(t, false)
	plainAddr, _ := startServer(t, true)
	c := newClient(t)
	ctx := ctxT(t, 5*time.Second)
	for _, tc := range []struct{ svc, method string }{
		{"Arith", "Reject"}, {"Nope", "Mul"}, {"Arith", "Nope"},
	} {
		var r testsvc.Reply
		errBatch := c.Call(ctx, batchAddr, tc.svc, tc.method, &testsvc.Args{}, &r)
		errPlain := c.Call(ctx, plainAddr, tc.svc, tc.method, &testsvc.Args{}, &r)
		require.Error(t, errBatch)
		var se client.ServiceError
		require.True(t, errors.As(errBatch, &se), "%T", errBatch)
		assert.Equal(t, errPlain.Error(), errBatch.Error(), tc)
	}
	assert.True(t, c.Info(plainAddr).Plain)
	assert.Equal(t, batchclient.Connected, c.Info(batchAddr).Status)
}

func TestPanicGivesErrorReply(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	var r testsvc.Reply
	err := c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Panic", &testsvc.Args{}, &r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[service internal error]: boom, method: Panic, argv: ")
	// The connection survives.
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	assert.Equal(t, 6, r.C)
}

func TestManyConcurrentCallsEachGetOwnReply(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	const n = 10000
	ctx := ctxT(t, 60*time.Second)
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		if err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r); err != nil {
			return err
		}
		if r.C != i*3 {
			return fmt.Errorf("call %d: reply %d", i, r.C)
		}
		return nil
	})
}

func TestContextDeadlineReturnsPromptly(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	var r testsvc.Reply
	err := c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 5000, B: 1}, &r)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Far below the handler's 5 s; generous for -race on 2 busy cores.
	assert.Less(t, time.Since(start), 3*time.Second)
}

// panicReply is a reply type whose decoder panics, as a mismatched custom
// decoder might.
type panicReply struct{}

func (*panicReply) DecodeMsgpack(*msgpack.Decoder) error { panic("bad reply type") }

// TestReplyDecodePanicFailsOnlyItsCall: a reply that the codec panics on
// fails its own call with ErrDecode, whether the lane's reader decoded it
// (a small reply, or any reply of Go) or the caller did (a large reply),
// and the lane goes on serving.
func TestReplyDecodePanicFailsOnlyItsCall(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 5*time.Second)
	for _, size := range []int{16, 64 << 10} {
		err := c.Call(ctx, addr, "Echo", "Grow", &size, &panicReply{})
		require.ErrorIs(t, err, batchclient.ErrDecode, "reply of %d bytes", size)
		assert.Contains(t, err.Error(), "bad reply type")
	}
	size := 16
	call := c.Go(ctx, addr, "Echo", "Grow", &size, &panicReply{}, nil)
	<-call.Done
	require.ErrorIs(t, call.Error, batchclient.ErrDecode)

	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	assert.Equal(t, 6, r.C)
}
