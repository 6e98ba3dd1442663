package batchclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestCallWithoutCodecFails: a serialize type rpcx has no codec for fails
// every operation with ErrUnsupportedCodec, at once, alone or among many
// callers (whose entries share frames), and leaves the lane working: the
// window's places of the failed calls come back, and a client with a
// codec then calls over the same server.
func TestCallWithoutCodecFails(t *testing.T) {
	const unregistered = protocol.SerializeType(13)
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithSerializeType(unregistered))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 10*time.Second)
	var r testsvc.Reply
	err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r)
	require.ErrorIs(t, err, batchclient.ErrUnsupportedCodec)
	call := <-c.Go(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r, nil).Done
	require.ErrorIs(t, call.Error, batchclient.ErrUnsupportedCodec)
	require.ErrorIs(t, c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}), batchclient.ErrUnsupportedCodec)
	// Many at once, past the lane's window many times over.
	concurrently(t, 200, func(i int) error {
		for j := 0; j < 100; j++ {
			var r testsvc.Reply
			err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: j}, &r)
			if !errors.Is(err, batchclient.ErrUnsupportedCodec) {
				return err
			}
		}
		return nil
	})
	require.Zero(t, batchclient.WokenCallers(c))
	good := newClient(t)
	waitConnected(t, good, addr)
	require.NoError(t, good.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.Equal(t, 6, r.C)
}

// TestNoCodecErrorIsRPCXs: where rpcx's own client fails a call for want
// of a codec with client.ErrUnsupportedCodec, so does the batch path, for
// Call, Go and Cast: code written against rpcx's sentinel keeps working.
func TestNoCodecErrorIsRPCXs(t *testing.T) {
	const unregistered = protocol.SerializeType(13)
	addr, _ := startServer(t, false)
	ctx := ctxT(t, 10*time.Second)
	args := &testsvc.Args{A: 2, B: 3}

	opt := client.DefaultOption
	opt.SerializeType = unregistered
	pc := client.NewClient(opt)
	require.NoError(t, pc.Connect("tcp", addr))
	t.Cleanup(func() { pc.Close() })
	var r testsvc.Reply
	plainErr := pc.Call(ctx, "Arith", "Mul", args, &r)
	require.ErrorIs(t, plainErr, client.ErrUnsupportedCodec, "rpcx's own answer")

	c := newClient(t, batchclient.WithSerializeType(unregistered))
	waitConnected(t, c, addr)
	require.ErrorIs(t, c.Call(ctx, addr, "Arith", "Mul", args, &r), client.ErrUnsupportedCodec)
	call := <-c.Go(ctx, addr, "Arith", "Mul", args, &r, nil).Done
	require.ErrorIs(t, call.Error, client.ErrUnsupportedCodec)
	require.ErrorIs(t, c.Cast(ctx, addr, "Arith", "Mul", args), client.ErrUnsupportedCodec)
}
