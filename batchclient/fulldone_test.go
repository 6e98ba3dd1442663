package batchclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// fullDone is a done channel with no room left, as a caller's shared
// channel is when it has not read its completions yet.
func fullDone() chan *client.Call {
	ch := make(chan *client.Call, 1)
	ch <- &client.Call{}
	return ch
}

// returnsWithin fails the test if fn has not returned within d.
func returnsWithin(t *testing.T, name string, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("%s: Go blocked its caller on a full done channel", name)
	}
}

// TestGoNeverBlocksOnFullDone: a call that fails before it is sent (the
// peer is down) completes at once; with a done channel that has no room,
// Go drops the completion, as rpcx's Call.done does, instead of blocking
// its caller for good. Side by side: plain rpcx's Go on a client whose
// connection is gone, the batch client's Go, and the drop-in XClient's Go
// (with a reply, and without one: a oneway call) to a server that is down.
func TestGoNeverBlocksOnFullDone(t *testing.T) {
	dead := freeAddr(t)
	live, _ := startServer(t, true)
	ctx := ctxT(t, 10*time.Second)

	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", live))
	pc.Close()
	c := newClient(t)
	d, err := client.NewPeer2PeerDiscovery("tcp@"+dead, "")
	require.NoError(t, err)
	xc := batchclient.NewXClient("Arith", client.Failfast, client.RandomSelect, d, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })

	args := &testsvc.Args{A: 1, B: 2}
	returnsWithin(t, "plain rpcx", 5*time.Second, func() {
		pc.Go(ctx, "Arith", "Mul", args, &testsvc.Reply{}, fullDone())
	})
	returnsWithin(t, "batch client", 5*time.Second, func() {
		call := c.Go(ctx, dead, "Arith", "Mul", args, &testsvc.Reply{}, fullDone())
		if !errors.Is(call.Error, batchclient.ErrPeerDown) {
			t.Errorf("batch client: %v, want ErrPeerDown", call.Error)
		}
	})
	returnsWithin(t, "drop-in XClient", 5*time.Second, func() {
		_, _ = xc.Go(ctx, "Mul", args, &testsvc.Reply{}, fullDone())
	})
	returnsWithin(t, "drop-in XClient, oneway", 5*time.Second, func() {
		_, _ = xc.Go(ctx, "Mul", args, nil, fullDone())
	})
}
