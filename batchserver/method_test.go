package batchserver_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Shapes has methods of every signature shape rpcx accepts.
type Shapes struct{ add int }

// Ptr is the common shape: pointer receiver, context.Context, pointers.
func (s *Shapes) Ptr(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	if a.A < 0 {
		return errors.New("negative")
	}
	if c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn); c == nil {
		return errors.New("no connection in the context")
	}
	r.C = a.A*a.B + s.add
	return nil
}

// ByValue takes its argument by value.
func (s *Shapes) ByValue(_ context.Context, a testsvc.Args, r *testsvc.Reply) error {
	r.C = a.A*a.B + s.add
	return nil
}

// Share declares rpcx's concrete context type.
func (s *Shapes) Share(ctx *share.Context, a *testsvc.Args, r *testsvc.Reply) error {
	if c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn); c == nil {
		return errors.New("no connection in the context")
	}
	r.C = a.A*a.B + s.add
	return nil
}

// ValShapes is registered by value: its receiver is not a pointer.
type ValShapes struct{ add int }

// Val multiplies and adds.
func (v ValShapes) Val(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	r.C = a.A*a.B + v.add
	return nil
}

// TestEverySignatureShape: methods and functions of every shape rpcx
// accepts give the same results on the batch path as on the plain path;
// the common shapes (a receiver held by value too) are called without
// reflect, the others with it.
func TestEverySignatureShape(t *testing.T) {
	s, p := newServer(t)
	require.NoError(t, s.RegisterName("Shapes", &Shapes{add: 1}, ""))
	require.NoError(t, s.RegisterName("Val", ValShapes{add: 2}, ""))
	require.NoError(t, s.RegisterFunction("Fn", Add, ""))
	captured := 3
	require.NoError(t, s.RegisterFunctionName("Fn", "Closure", func(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
		r.C = a.A*a.B + captured
		return nil
	}, ""))
	addr := serve(t, s)
	c := newClient(t)
	waitConnected(t, c, addr)
	pc := plainClient(t, addr)
	ctx := ctxT(t, 5*time.Second)

	for _, tc := range []struct {
		svc, method string
		direct      bool
		want        int
	}{
		{"Shapes", "Ptr", true, 43},
		{"Shapes", "ByValue", false, 43},
		{"Shapes", "Share", false, 43},
		{"Val", "Val", true, 44},
		{"Fn", "Add", true, 13},
		{"Fn", "Closure", true, 45},
	} {
		assert.Equal(t, tc.direct, batchserver.CallsDirectly(p, tc.svc, tc.method), "%s.%s", tc.svc, tc.method)
		args := &testsvc.Args{A: 6, B: 7}
		var batch, plain testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, tc.svc, tc.method, args, &batch), "%s.%s", tc.svc, tc.method)
		require.NoError(t, pc.Call(ctx, tc.svc, tc.method, args, &plain), "%s.%s", tc.svc, tc.method)
		assert.Equal(t, tc.want, batch.C, "%s.%s", tc.svc, tc.method)
		assert.Equal(t, plain, batch, "%s.%s", tc.svc, tc.method)
	}

	var r testsvc.Reply
	err := c.Call(ctx, addr, "Shapes", "Ptr", &testsvc.Args{A: -1}, &r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "negative")
}

// resets counts Reset calls of the pooled types below.
var resets struct{ args, replies atomic.Int64 }

// PooledArgs has rpcx's Reset method: rpcx reuses such values.
type PooledArgs struct{ A, B int }

// Reset clears the arguments for reuse.
func (a *PooledArgs) Reset() { *a = PooledArgs{}; resets.args.Add(1) }

// PooledReply has rpcx's Reset method.
type PooledReply struct{ C int }

// Reset clears the reply for reuse.
func (r *PooledReply) Reset() { *r = PooledReply{}; resets.replies.Add(1) }

// Pooled multiplies pooled values.
type Pooled struct{}

// Mul multiplies; it fails when the reply it is given was not reset.
func (Pooled) Mul(_ context.Context, a *PooledArgs, r *PooledReply) error {
	if r.C != 0 {
		return errors.New("reply not reset")
	}
	r.C = a.A * a.B
	return nil
}

// TestResettableValuesReused: as rpcx does on the plain path, arguments
// and replies whose types have a Reset method are reset after each call
// and reused, and every call still gets its own result.
func TestResettableValuesReused(t *testing.T) {
	s, _ := newServer(t)
	require.NoError(t, s.RegisterName("Pooled", Pooled{}, ""))
	addr := serve(t, s)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 5*time.Second)
	args0, replies0 := resets.args.Load(), resets.replies.Load()
	const n = 50
	for i := 1; i <= n; i++ {
		var r PooledReply
		require.NoError(t, c.Call(ctx, addr, "Pooled", "Mul", &PooledArgs{A: i, B: 3}, &r))
		require.Equal(t, 3*i, r.C)
	}
	// The server reset (and pooled) every argument and reply it used; the
	// client decoding into the caller's values resets nothing.
	assert.Equal(t, int64(n), resets.args.Load()-args0)
	assert.Equal(t, int64(n), resets.replies.Load()-replies0)
}
