package batchclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Partial is a service whose handler fills its reply in and fails.
type Partial struct{}

// Fill sets the reply to a.A and fails with "partial failure".
func (Partial) Fill(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	r.C = a.A
	return errors.New("partial failure")
}

// servePartial serves Partial on loopback, with the batch plugin when
// batch is set.
func servePartial(t *testing.T, batch bool) string {
	t.Helper()
	s := server.NewServer()
	if batch {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Partial", Partial{}, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr
}

// TestFailedCallKeepsHandlersReply: rpcx's server writes the reply the
// handler filled in beside its error, and rpcx's client decodes it into
// the call's reply value. Run side by side, plain rpcx's client and the
// batch client (Call and Go, over lanes and over the plain fallback) give
// the same: the error "partial failure" and the reply C=42.
func TestFailedCallKeepsHandlersReply(t *testing.T) {
	plainAddr, batchAddr := servePartial(t, false), servePartial(t, true)
	ctx := ctxT(t, 10*time.Second)

	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", plainAddr))
	t.Cleanup(func() { pc.Close() })
	c := newClient(t)
	waitConnected(t, c, batchAddr)
	require.False(t, c.Info(batchAddr).Plain)
	waitConnected(t, c, plainAddr)
	require.True(t, c.Info(plainAddr).Plain)

	goCall := func(call *client.Call) error {
		select {
		case <-call.Done:
			return call.Error
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	paths := []struct {
		name string
		call func(r *testsvc.Reply) error
	}{
		{"plain rpcx Call", func(r *testsvc.Reply) error { return pc.Call(ctx, "Partial", "Fill", &testsvc.Args{A: 42}, r) }},
		{"plain rpcx Go", func(r *testsvc.Reply) error {
			return goCall(pc.Go(ctx, "Partial", "Fill", &testsvc.Args{A: 42}, r, make(chan *client.Call, 1)))
		}},
		{"lanes Call", func(r *testsvc.Reply) error {
			return c.Call(ctx, batchAddr, "Partial", "Fill", &testsvc.Args{A: 42}, r)
		}},
		{"lanes Go", func(r *testsvc.Reply) error {
			return goCall(c.Go(ctx, batchAddr, "Partial", "Fill", &testsvc.Args{A: 42}, r, make(chan *client.Call, 1)))
		}},
		{"fallback Call", func(r *testsvc.Reply) error {
			return c.Call(ctx, plainAddr, "Partial", "Fill", &testsvc.Args{A: 42}, r)
		}},
		{"fallback Go", func(r *testsvc.Reply) error {
			return goCall(c.Go(ctx, plainAddr, "Partial", "Fill", &testsvc.Args{A: 42}, r, make(chan *client.Call, 1)))
		}},
	}
	for _, p := range paths {
		var r testsvc.Reply
		err := p.call(&r)
		require.Error(t, err, p.name)
		_, isService := err.(client.ServiceError)
		assert.True(t, isService, "%s: %T is not a client.ServiceError", p.name, err)
		assert.Equal(t, "partial failure", err.Error(), p.name)
		assert.Equal(t, 42, r.C, "%s: the reply the handler filled in", p.name)
	}
}
