package batchclient_test

import (
	"sync"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// A pool starts with MinLanes lanes (one by default), WithLanes fixes the
// count whatever the server announces, and Start on a connected address
// changes nothing (ecall's connect_is_idempotent).
func TestLaneCountAndIdempotentStart(t *testing.T) {
	addr, p := startServer(t, false, batchserver.WithPoolSize(3))
	c := newClient(t)
	in := waitConnected(t, c, addr)
	assert.Equal(t, 1, in.Lanes)
	require.NoError(t, c.Start(addr))
	assert.Equal(t, in, c.Info(addr))
	assert.Equal(t, p.Incarnation(), in.Incarnation)

	c2 := newClient(t, batchclient.WithLanes(5))
	assert.Equal(t, 5, waitConnected(t, c2, addr).Lanes)
	// A minimum above the server's pool is held to the pool.
	c3 := newClient(t, batchclient.WithLaneRange(2, 0))
	assert.Equal(t, 2, waitConnected(t, c3, addr).Lanes)
	c4 := newClient(t, batchclient.WithLaneRange(8, 0))
	assert.Equal(t, 3, waitConnected(t, c4, addr).Lanes)
}

// No frame carries more entries than the smaller of the two batch caps
// (ecall's worker_uses_configured_batch_size).
func TestFramesRespectBatchCap(t *testing.T) {
	for _, tc := range []struct{ client, server, want int }{{2, 1000, 2}, {1000, 3, 3}} {
		addr, p := startServer(t, false, batchserver.WithBatchCap(tc.server), batchserver.WithPoolSize(1))
		reg := metrics.NewRegistry()
		c := newClient(t, batchclient.WithBatchCap(tc.client), batchclient.WithMetrics(reg))
		waitConnected(t, c, addr)
		var wg sync.WaitGroup
		ctx := ctxT(t, 30*time.Second)
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				var r testsvc.Reply
				assert.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r))
				assert.Equal(t, 2*i, r.C)
			}(i)
		}
		wg.Wait()
		srv := p.Metrics().Get("rpcxbatch.server.batch_size").(metrics.Histogram)
		cli := reg.Get("rpcxbatch.client.batch_size").(metrics.Histogram)
		assert.LessOrEqual(t, srv.Max(), int64(tc.want))
		assert.LessOrEqual(t, cli.Max(), int64(tc.want))
		assert.Equal(t, int64(200), counter(t, p, "rpcxbatch.server.calls"))
	}
}
