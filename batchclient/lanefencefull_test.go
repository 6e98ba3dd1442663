package batchclient_test

import (
	"context"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// A lane's fence call is queued however full its queue is: when the pool
// grows while the server's window holds a lane back and callers keep its
// queue full, the moved keys still wait for the fence call's answer, after
// the sends before it ran. (Left to credits when the fence found no room,
// the casts queued after it were counted in place of the slow sends before
// it: "sends out of order", 3-24 out of order and 0-8 of a key's sends
// at once, in 10 runs of 10.)
func TestKeyedSendsKeepOrderWhenTheFenceFindsTheQueueFull(t *testing.T) {
	const (
		keys    = 16
		perKey  = 48
		casters = 16
		cycles  = 8
	)
	addr, seqs := serveKeyedOrder(t, 2, 16, 3*time.Millisecond)

	reg := metrics.NewRegistry()
	// A queue a little deeper than the window: the casters keep it full
	// while the slow sends hold the window.
	c := newClient(t, batchclient.WithLaneRange(1, 2), batchclient.WithLaneIdle(20*time.Millisecond),
		batchclient.WithQueueLimits(48, 1<<20), batchclient.WithMetrics(reg))
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := keyedLoad{keys: keys, perKey: perKey, cycles: cycles, casters: casters, casts: 2000, between: func() {
		// Long enough for the idle pool to retire its second lane, so
		// that the next cycle grows it again.
		require.Eventually(t, func() bool { return c.Info(addr).Lanes == 1 }, 5*time.Second, 5*time.Millisecond, "the idle pool retires its second lane")
	}}
	requireKeyedOrder(t, seqs, load.run(t, ctx, c, addr), reg)
}
