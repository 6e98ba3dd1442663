package batchclient_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Gauge measures how many of its handlers run at once.
type Gauge struct {
	now, max atomic.Int64
}

// Hold runs for A milliseconds and counts itself meanwhile.
func (g *Gauge) Hold(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-time.After(time.Duration(a.A) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	r.C = a.B
	return nil
}

// maxConcurrency serves Gauge with opts (and the batch plugin with bopts
// unless plain), makes n concurrent calls of ms milliseconds through rpcx's
// XClient or the drop-in, and returns the most handlers that ran at once.
func maxConcurrency(t *testing.T, plain bool, n, ms int, opts []server.OptionFn, bopts ...batchserver.Option) int64 {
	t.Helper()
	s := server.NewServer(opts...)
	if !plain {
		_, err := batchserver.New(s, bopts...)
		require.NoError(t, err)
	}
	g := new(Gauge)
	require.NoError(t, s.RegisterName("Gauge", g, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	var xc client.XClient
	if plain {
		xc = client.NewXClient("Gauge", client.Failtry, client.RoundRobin, d, client.DefaultOption)
	} else {
		xc = batchclient.NewXClient("Gauge", client.Failtry, client.RoundRobin, d, client.DefaultOption)
	}
	t.Cleanup(func() { xc.Close() })
	ctx := ctxT(t, 60*time.Second)
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		if err := xc.Call(ctx, "Hold", &testsvc.Args{A: ms, B: i}, &r); err != nil {
			return err
		}
		if r.C != i {
			t.Errorf("call %d got %d", i, r.C)
		}
		return nil
	})
	m := g.max.Load()
	t.Logf("plain=%v: %d concurrent %d ms calls, at most %d handlers at once", plain, n, ms, m)
	return m
}

// server.WithPool bounds the handlers running at once on the batch path
// as on plain rpcx: 100 concurrent 50 ms calls, a pool of 4. The bound is
// asserted, and that the batch path runs its calls side by side on the
// pool; not that it fills the pool at some instant: its frames' handlers
// and the lanes' heartbeats run on the same pool, and on a busy machine
// one of them held a worker whenever the calls peaked (3 at once, in a
// stress round beside a second make test).
func TestPoolBoundsBatchedHandlers(t *testing.T) {
	opts := []server.OptionFn{server.WithPool(4, 1000)}
	plain := maxConcurrency(t, true, 100, 50, opts)
	batch := maxConcurrency(t, false, 100, 50, opts)
	assert.LessOrEqual(t, plain, int64(4), "plain rpcx")
	assert.LessOrEqual(t, batch, int64(4), "batch path")
	assert.GreaterOrEqual(t, batch, int64(2), "batch path: calls ran one at a time on a pool of 4")
}

// countingPool is a server.WorkerPool of n goroutines, without TrySubmit:
// Submit blocks while all n are busy and its one-slot queue is taken.
type countingPool struct {
	tasks chan func()
	done  chan struct{}
}

func newCountingPool(n int) *countingPool {
	p := &countingPool{tasks: make(chan func(), 1), done: make(chan struct{})}
	for i := 0; i < n; i++ {
		go func() {
			for {
				select {
				case task := <-p.tasks:
					task()
				case <-p.done:
					return
				}
			}
		}()
	}
	return p
}

func (p *countingPool) Submit(task func())           { p.tasks <- task }
func (p *countingPool) StopAndWaitFor(time.Duration) { p.Stop() }
func (p *countingPool) StopAndWait()                 { p.Stop() }
func (p *countingPool) Stop() context.Context {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	return context.Background()
}

// server.WithCustomPool bounds them too, with a pool that can only block
// (no TrySubmit, no capacity to read): the frames rpcx runs on the same
// pool never wait for workers that wait for them.
func TestCustomPoolBoundsBatchedHandlers(t *testing.T) {
	plainPool, batchPool := newCountingPool(3), newCountingPool(3)
	t.Cleanup(func() { plainPool.Stop(); batchPool.Stop() })
	plain := maxConcurrency(t, true, 60, 30, []server.OptionFn{server.WithCustomPool(plainPool)})
	batch := maxConcurrency(t, false, 60, 30, []server.OptionFn{server.WithCustomPool(batchPool)})
	assert.Equal(t, int64(3), plain, "plain rpcx")
	assert.Equal(t, plain, batch, "batch path")
}

// WithHandlerPool gives the batch path a pool of its own choosing.
func TestHandlerPoolOption(t *testing.T) {
	pool := newCountingPool(2)
	t.Cleanup(func() { pool.Stop() })
	batch := maxConcurrency(t, false, 40, 30, nil, batchserver.WithHandlerPool(pool))
	assert.Equal(t, int64(2), batch)
}

// With a pond pool the window each lane gets is what the pool can run and
// queue, so a client does not pile more entries on the server than the
// pool holds.
func TestPoolLowersWindow(t *testing.T) {
	s := server.NewServer(server.WithPool(4, 60))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	assert.Equal(t, 64, p.Options().Window)
}

// Handlers slower than the lanes' heartbeat timeout, filling every worker
// of the pool: rpcx answers a lane's heartbeat on the same pool, so no
// answer comes while the workers are busy. The lanes must not take the
// busy server for a frozen one; every call completes, as on plain rpcx.
func TestPoolSlowHandlersKeepLanes(t *testing.T) {
	opts := []server.OptionFn{server.WithPool(2, 100)}
	slow := int(batchclient.DefaultHeartbeatTimeout/time.Millisecond) + 500
	plain := maxConcurrency(t, true, 4, slow, opts)
	batch := maxConcurrency(t, false, 4, slow, opts)
	assert.Equal(t, int64(2), plain, "plain rpcx")
	assert.Equal(t, plain, batch, "batch path")
}

// With a pool, the window keeps work from piling up on the server: a lane
// gets no more entries unfinished there than the pool runs and queues
// (here 2 + 6), so a burst of casts to slow (300 ms) handlers fills the
// client's bounded queue (16), and the overflow policy applies there: each
// cast waits for room for at most 20 ms. Without the bound the server took
// the whole burst and no cast waited.
func TestPoolWindowPushesBackToClient(t *testing.T) {
	s := server.NewServer(server.WithPool(2, 6))
	_, err := batchserver.New(s)
	require.NoError(t, err)
	g := new(Gauge)
	require.NoError(t, s.RegisterName("Gauge", g, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))

	c := newClient(t, batchclient.WithLanes(1), batchclient.WithQueueLimits(16, 1<<20))
	waitConnected(t, c, addr)
	const burst = 100
	waited := 0
	for i := 0; i < burst; i++ {
		// Cancelled rather than timed out: a deadline would travel with
		// the cast and end its handler at 20 ms.
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(20*time.Millisecond, cancel)
		err := c.Cast(ctx, addr, "Gauge", "Hold", &testsvc.Args{A: 300, B: i})
		timer.Stop()
		cancel()
		switch {
		case errors.Is(err, context.Canceled):
			waited++
		case err != nil:
			t.Fatalf("cast %d: %v", i, err)
		}
	}
	t.Logf("%d of %d casts found the client's queue full for 20 ms", waited, burst)
	// 8 on the server, 16 queued, and 2 more every 300 ms as handlers
	// finish: over 70 casts cannot get in; 40 leaves room for a slow
	// machine.
	assert.GreaterOrEqual(t, waited, 40)
	assert.LessOrEqual(t, g.max.Load(), int64(2))
}

// A graceful Shutdown with a pool drains batched calls as without one:
// rpcx runs the frames themselves on the pool, and frames read as the
// shutdown begins wait there for their connection's entries, which must
// not then wait for those same workers (before holdOffPool, Shutdown ran
// into its 20 s context).
func TestPoolShutdownDrains(t *testing.T) {
	s := server.NewServer(server.WithPool(2, 100))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	g := new(Gauge)
	require.NoError(t, s.RegisterName("Gauge", g, ""))
	addr, _, err := testsvc.Serve(s)
	require.NoError(t, err)

	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)
	const n = 12
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			var r testsvc.Reply
			errs <- c.Call(ctx, addr, "Gauge", "Hold", &testsvc.Args{A: 100, B: i}, &r)
		}()
	}
	// Let every call reach the server before it shuts down: a call in a
	// frame the server never read fails retryably (ErrConnection), which
	// is not what this test is about. Read calls must all be answered.
	require.Eventually(t, func() bool { return counter(t, p, "rpcxbatch.server.calls") == n && g.now.Load() > 0 },
		10*time.Second, time.Millisecond)
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, s.Shutdown(sctx))
	took := time.Since(start)
	failed := 0
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			failed++
			t.Errorf("a call the server had read failed: %v", err)
		}
	}
	t.Logf("Shutdown took %v; %d of %d calls failed", took, failed, n)
	assert.Less(t, took, 10*time.Second, "Shutdown waited for its context")
}
