package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestPlainCallerCallEndedByContextLeavesReplyAlone: PlainCaller.Call
// whose context ends before the reply returns the context's error, and the
// reply arriving later is not written into the caller's value (plain
// rpcx's Client.Call forgets such a call; PlainCaller waits on Go, so it
// decodes into a copy).
func TestPlainCallerCallEndedByContextLeavesReplyAlone(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })

	var r testsvc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = pc.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 300, B: 7}, &r)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The server answers at 300 ms; give its reply time to arrive.
	time.Sleep(700 * time.Millisecond)
	require.Zero(t, r.C, "the late reply was written into the caller's reply after Call returned")

	// A call that completes still fills the caller's value.
	require.NoError(t, pc.Call(ctxT(t, 5*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 1, B: 9}, &r))
	require.Equal(t, 9, r.C)
}
