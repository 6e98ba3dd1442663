package rpcxlayout_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Double is an rpcx function service.
func Double(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	r.C = 2 * a.A
	return nil
}

// The option fields read back what server.NewServer's options set.
func TestOptions(t *testing.T) {
	s := server.NewServer(server.WithReadTimeout(3*time.Second), server.WithWriteTimeout(4*time.Second), server.WithPool(2, 8))
	rt, ok := rpcxlayout.ReadTimeout(s)
	require.True(t, ok)
	require.Equal(t, 3*time.Second, rt)
	wt, ok := rpcxlayout.WriteTimeout(s)
	require.True(t, ok)
	require.Equal(t, 4*time.Second, wt)
	pool, ok := rpcxlayout.Pool(s)
	require.True(t, ok)
	require.NotNil(t, pool)

	plain := server.NewServer()
	pool, ok = rpcxlayout.Pool(plain)
	require.True(t, ok)
	require.Nil(t, pool)
	router, ok := rpcxlayout.Router(plain)
	require.True(t, ok)
	plain.AddHandler("Svc", "M", func(*server.Context) error { return nil })
	require.Contains(t, router, "Svc.M", "Router is the very map AddHandler writes")
}

// ReadService finds a registered service's methods and functions with
// their types, and reports a missing one as not found.
func TestReadService(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	// A service of functions of its own: rpcx v1.9.4 panics adding a
	// function to a service of methods.
	require.NoError(t, s.RegisterFunctionName("Fn", "Double", Double, ""))

	svc, found, ok := rpcxlayout.ReadService(s, "Arith")
	require.True(t, ok)
	require.True(t, found)
	require.True(t, svc.Rcvr.IsValid())
	mul, ok := svc.Methods["Mul"]
	require.True(t, ok, "methods: %v", svc.Methods)
	require.Equal(t, "Mul", mul.Name)
	require.True(t, mul.Fn.IsValid())
	require.Equal(t, "*testsvc.Args", mul.ArgType.String())
	require.Equal(t, "*testsvc.Reply", mul.ReplyType.String())
	require.Empty(t, svc.Functions)

	svc, found, ok = rpcxlayout.ReadService(s, "Fn")
	require.True(t, ok)
	require.True(t, found)
	require.Empty(t, svc.Methods)
	fn, ok := svc.Functions["Double"]
	require.True(t, ok, "functions: %v", svc.Functions)
	require.Empty(t, fn.Name)
	require.True(t, fn.Fn.IsValid())
	require.Equal(t, "*testsvc.Reply", fn.ReplyType.String())

	_, found, ok = rpcxlayout.ReadService(s, "NoSuch")
	require.True(t, ok)
	require.False(t, found)
}

// ReadShutdown points at the server's own fields: Shutdown sets
// inShutdown, and UnregisterAll the once's flag.
func TestReadShutdown(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	rs, ok := rpcxlayout.ReadShutdown(s)
	require.True(t, ok)
	require.NotNil(t, rs.Mu)
	require.NotNil(t, rs.UnregisteredAll)
	require.Zero(t, atomic.LoadInt32(rs.InShutdown))
	require.Zero(t, atomic.LoadInt32(rs.HandlerMsgNum))
	require.False(t, rs.UnregisteredAll.Load())
	require.NoError(t, s.UnregisterAll())
	require.True(t, rs.UnregisteredAll.Load())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx) // never served: only the flag matters here
	require.Equal(t, int32(1), atomic.LoadInt32(rs.InShutdown))
}

// A share.Context built in place works once SetShareContextLock gave it a
// lock, and that lock is the one its methods take.
func TestSetShareContextLock(t *testing.T) {
	require.True(t, rpcxlayout.CanSetShareContextLock())
	var sc share.Context
	sc.Context = context.Background()
	var mu sync.Mutex
	require.True(t, rpcxlayout.SetShareContextLock(&sc, &mu))
	sc.SetValue("k", "v")
	require.Equal(t, "v", sc.Value("k"))
	sc.Lock()
	require.False(t, mu.TryLock(), "share.Context's Lock took another lock")
	sc.Unlock()
	require.True(t, mu.TryLock())
	mu.Unlock()
}
