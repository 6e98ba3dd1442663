package batchserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

func startAuthServer(t *testing.T) string {
	t.Helper()
	s, _ := newServer(t)
	s.AuthFunc = func(_ context.Context, _ *protocol.Message, token string) error {
		if token != "good" {
			return errors.New("invalid token")
		}
		return nil
	}
	return serve(t, s)
}

// TestAuthGoodToken: a client whose frames and entries carry the good token
// gets its calls run.
func TestAuthGoodToken(t *testing.T) {
	addr := startAuthServer(t)
	c := newClient(t, batchclient.WithAuth("good"))
	in := waitConnected(t, c, addr)
	require.Equal(t, batchclient.Connected, in.Status)

	var r testsvc.Reply
	require.NoError(t, c.Call(withToken(ctxT(t, 5*time.Second), "good"), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	assert.Equal(t, 42, r.C)
}

// TestAuthBadTokenSameErrorAsPlain: a client with a bad token gets the error
// rpcx's own client gets, as a client.ServiceError.
func TestAuthBadTokenSameErrorAsPlain(t *testing.T) {
	addr := startAuthServer(t)

	// What plain rpcx says.
	pc := plainClient(t, addr)
	var r testsvc.Reply
	errPlain := pc.Call(withToken(ctxT(t, 5*time.Second), "bad"), "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r)
	require.Error(t, errPlain)
	require.Equal(t, "invalid token", errPlain.Error())

	c := newClient(t, batchclient.WithAuth("bad"))
	errBatch := c.Call(withToken(ctxT(t, 5*time.Second), "bad"), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r)
	require.Error(t, errBatch)
	var se client.ServiceError
	assert.True(t, errors.As(errBatch, &se), "%T: %v", errBatch, errBatch)
	assert.Equal(t, errPlain.Error(), errBatch.Error())
}

// TestAuthPerEntry: a good frame-level token does not let entries through
// whose own token is bad; a good entry on the same client still runs. A
// batch is never a way around auth.
func TestAuthPerEntry(t *testing.T) {
	addr := startAuthServer(t)
	c := newClient(t, batchclient.WithAuth("good"), batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 5*time.Second)

	// Issue both at once so they are likely to share a frame.
	var rBad, rGood, rNone testsvc.Reply
	bad := c.Go(withToken(ctx, "bad"), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &rBad, nil)
	good := c.Go(withToken(ctx, "good"), addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 5}, &rGood, nil)
	none := c.Go(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &rNone, nil)
	for _, call := range []*client.Call{bad, good, none} {
		select {
		case <-call.Done:
		case <-ctx.Done():
			t.Fatal("call did not complete")
		}
	}
	require.Error(t, bad.Error)
	assert.Equal(t, "invalid token", bad.Error.Error())
	assert.Zero(t, rBad.C, "the rejected call must not have run")
	require.Error(t, none.Error, "an entry with no token must be rejected")
	assert.Equal(t, "invalid token", none.Error.Error())
	require.NoError(t, good.Error)
	assert.Equal(t, 20, rGood.C)

	// The lane survives the rejections.
	var r testsvc.Reply
	require.NoError(t, c.Call(withToken(ctx, "good"), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 3}, &r))
	assert.Equal(t, 9, r.C)
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
}

// TestAuthPerEntrySends: sends with a bad entry token are not delivered.
func TestAuthPerEntrySends(t *testing.T) {
	s, p := newServer(t)
	s.AuthFunc = func(_ context.Context, _ *protocol.Message, token string) error {
		if token != "good" {
			return errors.New("invalid token")
		}
		return nil
	}
	addr := serve(t, s)
	got := make(chan string, 16)
	require.NoError(t, p.HandleSend("h", func(_ context.Context, b []byte) { got <- string(b) }))
	c := newClient(t, batchclient.WithAuth("good"), batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := batchclient.WithKey(ctxT(t, 5*time.Second), "k")
	require.NoError(t, c.Send(withToken(ctx, "bad"), addr, "h", []byte("bad")))
	require.NoError(t, c.Send(ctx, addr, "h", []byte("none")))
	require.NoError(t, c.Send(withToken(ctx, "good"), addr, "h", []byte("good")))
	select {
	case v := <-got:
		assert.Equal(t, "good", v)
	case <-time.After(5 * time.Second):
		t.Fatal("the good send did not arrive")
	}
	select {
	case v := <-got:
		t.Fatalf("unexpected send %q delivered", v)
	case <-time.After(50 * time.Millisecond):
	}
	assert.Equal(t, int64(2), counter(t, p.Metrics(), "rpcxbatch.server.errors.auth"))
}
