package batchserver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestBusyEntriesRunOnFewWorkers: entries whose handlers never block (a
// cast storm and a burst of concurrent calls, frames of hundreds of
// entries) can only take turns on the machine's processors; the server
// runs them on a few goroutines that take one entry after another, not on
// a goroutine (and a stack) for every entry handed out at once.
func TestBusyEntriesRunOnFewWorkers(t *testing.T) {
	s, p := newServer(t)
	counter := new(Counter)
	require.NoError(t, s.RegisterName("Counter", counter, ""))
	addr := serve(t, s)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)

	const casts, calls = 30000, 3000
	var wg sync.WaitGroup
	for w := 0; w < 10; w++ {
		wg.Go(func() {
			for i := 0; i < casts/10; i++ {
				if err := c.Cast(ctx, addr, "Counter", "Inc", &testsvc.Args{A: i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	concurrently(t, calls, func(i int) error {
		var r testsvc.Reply
		return c.Call(ctx, addr, "Counter", "Inc", &testsvc.Args{A: i}, &r)
	})
	wg.Wait()
	require.True(t, eventually(20*time.Second, func() bool { return counter.n.Load() == casts+calls }),
		"ran %d of %d", counter.n.Load(), casts+calls)
	t.Logf("most workers %d", batchserver.MostWorkers(p))
	// A goroutine per entry would take at least one per call in flight
	// (3,000) on top of the casts'. The workers' count follows the
	// scheduler, not only the handlers: usually under 15, but on a loaded
	// 2-core machine under -race a worker held off its processor looks
	// held up and another is begun, and 60 runs of main gave up to 1,022
	// (2 over the 400 this bound was).
	assert.LessOrEqual(t, batchserver.MostWorkers(p), 2000, "goroutines that ran %d casts and %d calls", casts, calls)
}

// Barrier is a service whose handler returns only once n of its calls are
// in at the same time (or its caller's context ends).
type Barrier struct {
	n       int32
	in      atomic.Int32
	all     chan struct{}
	allOnce sync.Once
}

// Wait enters the barrier and waits for the others.
func (b *Barrier) Wait(ctx context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	if b.in.Add(1) == b.n {
		b.allOnce.Do(func() { close(b.all) })
	}
	select {
	case <-b.all:
		r.C = 1
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestBlockedHandlersHoldUpNoEntry: handlers that block run each on a
// goroutine of its own, however many: 2,000 calls whose handlers each wait
// until all 2,000 are in the handler at once all complete.
func TestBlockedHandlersHoldUpNoEntry(t *testing.T) {
	s, _ := newServer(t)
	const n = 2000
	b := &Barrier{n: n, all: make(chan struct{})}
	require.NoError(t, s.RegisterName("Barrier", b, ""))
	addr := serve(t, s)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 20*time.Second)

	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		if err := c.Call(ctx, addr, "Barrier", "Wait", &testsvc.Args{A: i}, &r); err != nil {
			return err
		}
		if r.C != 1 {
			t.Errorf("call %d: reply %d", i, r.C)
		}
		return nil
	})
	assert.EqualValues(t, n, b.in.Load())
}
