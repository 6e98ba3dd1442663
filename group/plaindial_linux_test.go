//go:build linux

package group_test

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// stalledAddr returns a loopback address whose dials hang: it listens with
// an accept backlog of 0 and never accepts, and its queue is filled, so the
// kernel drops further SYNs, as a firewall that drops them would.
func stalledAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	f := os.NewFile(uintptr(fd), "backlog0")
	ln, err := net.FileListener(f)
	f.Close()
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	for i := 0; i < 16; i++ {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			return addr // the queue is full: SYNs are dropped now
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the accept queue did not fill up")
	return ""
}

// A PlainCaller's call to a node that does not answer its SYNs returns by
// the call's deadline, not after rpcx's ConnectTimeout.
func TestPlainCallerDialHonoursCallerDeadline(t *testing.T) {
	addr := stalledAddr(t)
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
	addr := stalledAddr(t)
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
