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

// Grind is a service whose handler computes for a while (no blocking), so
// that a cast storm keeps the server's processors busy and its queue of
// entries waiting for a goroutine never empties.
type Grind struct{ n atomic.Int64 }

// Run computes for about 5 µs and counts itself.
func (s *Grind) Run(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	start := time.Now()
	x := a.A
	for time.Since(start) < 5*time.Microsecond {
		x = x*31 + 7
	}
	r.C = x
	s.n.Add(1)
	return nil
}

// TestWorkerQueueFollowsTheWindow: the entries waiting for a goroutine are
// bounded by the lanes' window, and so is the memory the queue holds,
// however many entries pass through it while it never empties. (It grew
// by every entry that passed through it until it emptied: room for
// 168,000 tasks, 9.4 MB, at the peak of a 10,000-writer cast storm, a
// fifth of the server's live heap; here 2,340-4,242 for 1,024.)
func TestWorkerQueueFollowsTheWindow(t *testing.T) {
	const lanes, window, casters, casts = 4, 256, 10, 200000
	s, p := newServer(t, batchserver.WithWindow(window))
	grind := new(Grind)
	require.NoError(t, s.RegisterName("Grind", grind, ""))
	addr := serve(t, s)
	c := newClient(t, batchclient.WithLanes(lanes))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)

	var wg sync.WaitGroup
	for w := 0; w < casters; w++ {
		wg.Go(func() {
			for i := 0; i < casts/casters && ctx.Err() == nil; i++ {
				if err := c.Cast(ctx, addr, "Grind", "Run", &testsvc.Args{A: i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.True(t, eventually(50*time.Second, func() bool { return grind.n.Load() == casts }),
		"ran %d of %d casts", grind.n.Load(), casts)
	most := batchserver.MostQueueCapacity(p)
	t.Logf("queue room at most %d (%d lanes, window %d)", most, lanes, window)
	// At most lanes × window entries wait at once; twice that allows for
	// the room growing by doubling.
	assert.LessOrEqual(t, most, 2*lanes*window, "room of the queue of %d casts through %d lanes' windows of %d", casts, lanes, window)

	// The server still serves.
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Grind", "Run", &testsvc.Args{A: 1}, &r))
}
