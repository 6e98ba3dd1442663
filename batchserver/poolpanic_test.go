package batchserver_test

import (
	"context"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// runThenPanicPool is a user's rpcx WorkerPool that runs a task inside
// Submit and then panics, for the plugin's entries only (rpcx's own
// requests run and return): a pool that fails after it has run the task.
type runThenPanicPool struct{}

func (runThenPanicPool) Submit(task func()) {
	task()
	if strings.Contains(string(debug.Stack()), "poolFeeder") {
		panic("runThenPanicPool: stopped")
	}
}
func (runThenPanicPool) StopAndWaitFor(time.Duration) {}
func (runThenPanicPool) Stop() context.Context        { return context.Background() }
func (runThenPanicPool) StopAndWait()                 {}

// countedArith counts the calls its method runs.
type countedArith struct{ runs atomic.Int64 }

func (a *countedArith) Mul(_ context.Context, args *testsvc.Args, r *testsvc.Reply) error {
	a.runs.Add(1)
	r.C = args.A * args.B
	return nil
}

// An entry a user's pool ran before its Submit panicked runs once: the
// plugin runs an entry on a goroutine of its own when Submit panics (a
// pool stopped by Shutdown panics before it runs anything), but not one
// the pool had run already. Run twice, its second run would read the
// frame's entries after the frame was done with them.
func TestPoolPanickingAfterRunRunsEntryOnce(t *testing.T) {
	s := server.NewServer(server.WithCustomPool(runThenPanicPool{}))
	svc := &countedArith{}
	require.NoError(t, s.RegisterName("Arith", svc, ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	addr := serve(t, s)
	c, err := batchclient.New()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const calls = 20
	for i := range calls {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r))
		assert.Equal(t, 3*i, r.C)
	}
	// A second run comes on a goroutine the plugin owns (submitOne's
	// spawn), which Plugin.Close waits for: after it, every run is in.
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	require.NoError(t, p.Close())
	assert.Equal(t, int64(calls), svc.runs.Load(), "entries ran more than once")
	// Run again after its frame was done, an entry reads a cleared entry
	// (its frame's entries went back to their pool): no service.
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.errors.unknown_service"), "an entry ran again after its frame was done")
}
