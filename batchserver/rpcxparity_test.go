package batchserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Issue 34: rpcx's own examples, switched over, behave as on plain rpcx.

// addHandlers adds rpcx AddHandler handlers to s: Fast.Mul writes the
// product and a response metadata value, Fast.Fail returns an error,
// Fast.Both writes a reply and then returns an error.
func addHandlers(s *server.Server) {
	s.AddHandler("Fast", "Mul", func(ctx *server.Context) error {
		var a testsvc.Args
		if err := ctx.Bind(&a); err != nil {
			return err
		}
		ctx.Get(share.ResMetaDataKey).(map[string]string)["handled"] = ctx.Metadata()["tag"]
		return ctx.Write(&testsvc.Reply{C: a.A * a.B})
	})
	s.AddHandler("Fast", "Fail", func(*server.Context) error { return errors.New("fast failed") })
	s.AddHandler("Fast", "Both", func(ctx *server.Context) error {
		_ = ctx.Write(&testsvc.Reply{C: 7})
		return errors.New("after the reply")
	})
}

// A handler added with Server.AddHandler, before or after the plugin, is
// reached by a batch client as by a plain one: same reply, same response
// metadata, same error.
func TestAddHandlerReachedOnLanesAsOnPlain(t *testing.T) {
	for _, after := range []bool{false, true} {
		s := server.NewServer()
		if !after {
			addHandlers(s)
		}
		_, err := batchserver.New(s)
		require.NoError(t, err)
		if after {
			addHandlers(s)
		}
		addr := serve(t, s)
		pc := plainClient(t, addr)
		bc := newClient(t)
		waitConnected(t, bc, addr)

		type outcome struct {
			reply testsvc.Reply
			meta  string
			err   string
		}
		run := func(call func(ctx context.Context, path, method string, args, reply any) error, method string) outcome {
			res := map[string]string{}
			ctx := context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, map[string]string{"tag": "t1"})
			ctx = context.WithValue(ctx, share.ResMetaDataKey, res)
			var o outcome
			if err := call(ctx, "Fast", method, &testsvc.Args{A: 6, B: 7}, &o.reply); err != nil {
				o.err = err.Error()
			}
			o.meta = res["handled"]
			return o
		}
		batchCall := func(ctx context.Context, path, method string, args, reply any) error {
			return bc.Call(ctx, addr, path, method, args, reply)
		}
		for _, m := range []string{"Mul", "Fail", "Both"} {
			plain, batch := run(pc.Call, m), run(batchCall, m)
			assert.Equal(t, plain, batch, "Fast.%s (handlers added after New: %v)", m, after)
		}
		assert.Equal(t, outcome{reply: testsvc.Reply{C: 42}, meta: "t1"}, run(batchCall, "Mul"))
	}
}

// A handler's panic is logged at ERROR with its stack on the batch path,
// as rpcx logs it for a plain request, so rpcx's default logger (level
// Error) shows it.
func TestHandlerPanicLoggedAtErrorAsOnPlain(t *testing.T) {
	addr, _, _ := startServer(t)
	pc := plainClient(t, addr)
	bc := newClient(t)
	waitConnected(t, bc, addr)
	var r testsvc.Reply

	from := rpcxLog.mark()
	require.Error(t, pc.Call(ctxT(t, 5*time.Second), "Arith", "Panic", &testsvc.Args{}, &r))
	_, plain := rpcxLog.findSince(from, "ERROR ", "boom", "goroutine ")
	require.True(t, plain, "plain rpcx logs a handler's panic at ERROR with the stack")

	from = rpcxLog.mark()
	require.Error(t, bc.Call(ctxT(t, 5*time.Second), addr, "Arith", "Panic", &testsvc.Args{}, &r))
	line, batch := rpcxLog.findSince(from, "ERROR ", "boom", "goroutine ")
	assert.True(t, batch, "the batch path logs a handler's panic at ERROR with the stack")
	assert.Contains(t, line, "Arith")
}
