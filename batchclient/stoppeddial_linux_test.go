//go:build linux

package batchclient_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Close interrupts the connect of a stopped address's plain client: the
// calls waiting for it fail with ErrClosed at once, not after rpcx's
// ConnectTimeout.
func TestStoppedAddressDialEndsWithClose(t *testing.T) {
	addr := startSYNDroppingPlainServer(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 8 * time.Second
	c := plainPeer(t, addr, batchclient.WithRPCXOption(opt))
	c.Stop(addr)

	const calls = 3
	returned := make(chan error, calls)
	for range calls {
		go func() {
			returned <- c.Call(ctxT(t, 30*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
		}()
	}
	// Coverage, not correctness: calls that come after Close fail the
	// same way.
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, c.Close())
	require.Less(t, time.Since(start), 2*time.Second, "Close waited for the connect")
	for i := range calls {
		select {
		case err := <-returned:
			require.ErrorIs(t, err, batchclient.ErrClosed, "call %d", i)
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d waiting for the connect did not return after Close", i)
		}
	}
}
