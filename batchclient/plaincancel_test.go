package batchclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestPlainFallbackCallEndedByContextLeavesReplyAlone: a Call over the
// plain fallback whose context ends before the reply returns the
// context's error, and the reply that comes later is not decoded into the
// caller's reply value, which is the caller's again once Call returns.
// Plain rpcx's Client.Call forgets the call when its context ends; run
// side by side with it.
func TestPlainFallbackCallEndedByContextLeavesReplyAlone(t *testing.T) {
	addr := freeAddr(t)
	servePlainAt(t, addr, nil)
	c := newClient(t)
	// The peer learns that addr has no batch plugin.
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}))
	require.True(t, c.Info(addr).Plain)

	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", addr))
	t.Cleanup(func() { pc.Close() })

	paths := map[string]func(ctx context.Context, r *testsvc.Reply) error{
		"plain rpcx": func(ctx context.Context, r *testsvc.Reply) error {
			return pc.Call(ctx, "Arith", "Sleep", &testsvc.Args{A: 300, B: 7}, r)
		},
		"rpcxbatch": func(ctx context.Context, r *testsvc.Reply) error {
			return c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 300, B: 7}, r)
		},
	}
	for name, call := range paths {
		t.Run(name, func(t *testing.T) {
			if name == "plain rpcx" && raceEnabled {
				// rpcx v1.9.4's Call reads the sequence number its send
				// goroutine writes when the context ends first (the race
				// this package avoids): the reference runs without the
				// detector (make test runs this test again without -race).
				t.Log("rpcx: left out under -race (rpcx's Client.call races with its send)")
				return
			}
			var r testsvc.Reply
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err := call(ctx, &r)
			require.True(t, errors.Is(err, context.DeadlineExceeded), "err %v", err)
			// The server answers at 300 ms; give its reply time to arrive.
			time.Sleep(700 * time.Millisecond)
			require.Zero(t, r.C, "the late reply was written into the caller's reply after Call returned")
		})
	}
}

// TestPlainFallbackGoEndedByContextLeavesReplyAlone: the same for Go,
// which completes its call with the context's error when the context ends
// first (as it does on lanes; rpcx's own Go does not watch the context):
// the reply arriving later is not written into the call's Reply.
func TestPlainFallbackGoEndedByContextLeavesReplyAlone(t *testing.T) {
	addr := freeAddr(t)
	servePlainAt(t, addr, nil)
	c := newClient(t)
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}))
	require.True(t, c.Info(addr).Plain)

	var r testsvc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	call := c.Go(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 300, B: 7}, &r, nil)
	select {
	case <-call.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end with its context")
	}
	require.ErrorIs(t, call.Error, context.DeadlineExceeded)
	time.Sleep(700 * time.Millisecond)
	require.Zero(t, r.C, "the late reply was written into the call's Reply after it completed")
}

// SlowBytes answers after A milliseconds with a fixed byte string.
type SlowBytes struct{}

// Take sleeps 300 ms (or until ctx ends) and returns "LATE-REPLY".
func (SlowBytes) Take(ctx context.Context, _ *testsvc.Args, r *[]byte) error {
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
	}
	*r = []byte("LATE-REPLY")
	return nil
}

// TestPlainFallbackCallLeavesReplyBufferAlone: a reply value that holds
// memory of the caller's (a byte slice with room, reused between calls)
// is not written into by a reply that arrives after the call's context
// ended: msgpack decodes a byte slice into the room it already has, so a
// copy of the slice header alone would still share it.
func TestPlainFallbackCallLeavesReplyBufferAlone(t *testing.T) {
	addr := freeAddr(t)
	s := servePlainAt(t, addr, nil)
	require.NoError(t, s.RegisterName("SlowBytes", SlowBytes{}, ""))
	c := newClient(t)
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}))
	require.True(t, c.Info(addr).Plain)

	out := make([]byte, 0, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Call(ctx, addr, "SlowBytes", "Take", &testsvc.Args{}, &out), context.DeadlineExceeded)
	time.Sleep(700 * time.Millisecond)
	require.Equal(t, make([]byte, 10), out[:10], "the late reply was written into the caller's buffer after Call returned")

	// A call that completes fills the caller's value.
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "SlowBytes", "Take", &testsvc.Args{}, &out))
	require.Equal(t, "LATE-REPLY", string(out))
}
