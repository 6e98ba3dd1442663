package batchserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// panickyPreCall panics on Mul with A == 99.
type panickyPreCall struct{}

func (panickyPreCall) PreCall(_ context.Context, _, method string, args any) (any, error) {
	if a, ok := args.(*testsvc.Args); ok && method == "Mul" && a.A == 99 {
		panic("plugin bug")
	}
	return args, nil
}

// A panic outside the handler (a PreCall plugin, AuthFunc) fails only that
// entry, as rpcx recovers it for a plain request; the server and the lane
// go on, for calls and for sends.
func TestPanicOutsideHandlerFailsOnlyTheEntry(t *testing.T) {
	s := server.NewServer()
	s.Plugins.Add(panickyPreCall{})
	s.AuthFunc = func(_ context.Context, req *protocol.Message, _ string) error {
		if req.ServicePath == "boom" {
			panic("auth bug")
		}
		return nil
	}
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	got := make(chan []byte, 4)
	require.NoError(t, p.HandleSend("boom", func(context.Context, []byte) { t.Error("delivered past a panicking AuthFunc") }))
	require.NoError(t, p.HandleSend("ok", func(_ context.Context, b []byte) { got <- b }))
	addr := serve(t, s)
	c := newClient(t)
	waitConnected(t, c, addr)

	var r testsvc.Reply
	err = c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 99, B: 1}, &r)
	require.Error(t, err)
	// rpcx writes a panic outside a service method as its value.
	assert.Equal(t, "plugin bug", err.Error())
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	assert.Equal(t, 42, r.C)

	ctx := ctxT(t, 5*time.Second)
	require.NoError(t, c.Send(ctx, addr, "boom", []byte("x")))
	require.NoError(t, c.Send(ctx, addr, "ok", []byte("after")))
	select {
	case b := <-got:
		assert.Equal(t, "after", string(b), "the lane kept delivering")
	case <-time.After(5 * time.Second):
		t.Fatal("a panic in AuthFunc stopped the lane's delivery")
	}
}
