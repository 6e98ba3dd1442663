package batchserver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// gate is a service whose calls wait until it opens; in counts the calls
// that have reached it.
type gate struct {
	open chan struct{}
	in   atomic.Int64
}

// Wait returns A once the gate is open, or the context's error.
func (g *gate) Wait(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	g.in.Add(1)
	select {
	case <-g.open:
		r.C = a.A
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestParkedWorkersCapped: "as many are kept parked as the busiest moment
// needed, at most 16,384" (the need's decay is TestParkedWorkersFollowTheLoad's). More calls than that run at once (Go calls: no
// client goroutine each, all held on the server until every one runs);
// once they are done, exactly the cap stays parked.
func TestParkedWorkersCapped(t *testing.T) {
	s, p := newServer(t)
	g := &gate{open: make(chan struct{})}
	require.NoError(t, s.RegisterName("Gate", g, ""))
	addr := serve(t, s)
	// 18,384 goroutines woken at once keep the server from answering a
	// heartbeat for seconds under -race on a busy machine (2.2 s once):
	// liveness is not what this test is about.
	c := newClient(t, batchclient.WithLanes(2), batchclient.WithHeartbeat(500*time.Millisecond, 20*time.Second))
	waitConnected(t, c, addr)
	const parkedCap = 16384 // README's figure
	require.Equal(t, parkedCap, batchserver.MaxIdleWorkers, "the cap differs from README's")
	n := parkedCap + 2000
	// A need far beyond the cap (it halves at each trim, once a second):
	// however slowly this machine parks the goroutines, only the cap
	// bounds them here.
	batchserver.AssumeWorkerNeed(p, 1<<30)
	ctx := ctxT(t, 90*time.Second)
	done := make(chan *client.Call, n)
	for i := 0; i < n; i++ {
		c.Go(ctx, addr, "Gate", "Wait", &testsvc.Args{A: i}, &testsvc.Reply{}, done)
	}
	// Every handler in at once, each on a goroutine of its own.
	require.True(t, eventually(60*time.Second, func() bool { return g.in.Load() == int64(n) }),
		"%d of %d calls running", g.in.Load(), n)
	// The lanes' heartbeats trim while the calls are held (each halves
	// the need), and a slow machine holds them for many seconds: assume
	// the need anew before they end.
	batchserver.AssumeWorkerNeed(p, 1<<30)
	close(g.open)
	seen := make([]bool, n)
	for i := 0; i < n; i++ {
		select {
		case call := <-done:
			require.NoError(t, call.Error)
			seen[call.Reply.(*testsvc.Reply).C] = true
		case <-ctx.Done():
			t.Fatalf("%d of %d calls returned", i, n)
		}
	}
	require.NotContains(t, seen, false, "a call got another's reply")
	batchserver.AssumeWorkerNeed(p, 1<<30)
	require.True(t, eventually(10*time.Second, func() bool { return batchserver.IdleWorkers(p) == parkedCap }),
		"parked: %d, cap %d", batchserver.IdleWorkers(p), parkedCap)
}
