//go:build linux

package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/synstall"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// A PlainCaller's call to a node that does not answer its SYNs returns by
// the call's deadline, not after rpcx's ConnectTimeout.
func TestPlainCallerDialHonoursCallerDeadline(t *testing.T) {
	addr := synstall.Addr(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 4 * time.Second
	pc := group.NewPlainCaller(opt)
	defer pc.Close()

	for _, cast := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		var err error
		if cast {
			err = pc.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3})
		} else {
			err = pc.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
		}
		took := time.Since(start)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "cast %v", cast)
		// 100 ms deadline against a 4 s ConnectTimeout; margin for a busy
		// machine.
		require.Less(t, took, 1500*time.Millisecond, "cast %v returned after %v", cast, took)
	}
}

// Close does not wait for a connect under way, and the call waiting for it
// fails with client.ErrShutdown.
func TestPlainCallerCloseInterruptsDial(t *testing.T) {
	addr := synstall.Addr(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 8 * time.Second
	pc := group.NewPlainCaller(opt)

	returned := make(chan error, 1)
	go func() {
		returned <- pc.Call(ctxT(t, 30*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
	}()
	// Coverage, not correctness: a Close that comes first fails the call
	// the same way.
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, pc.Close())
	require.Less(t, time.Since(start), 2*time.Second, "Close waited for the connect")
	select {
	case err := <-returned:
		require.ErrorIs(t, err, client.ErrShutdown)
	case <-time.After(5 * time.Second):
		t.Fatal("the call waiting for the connect did not return after Close")
	}
}
