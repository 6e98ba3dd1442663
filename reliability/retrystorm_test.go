package reliability_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// stormResult is what one retry storm delivered: the casts the child
// received while it ran and the longest pause between two of them.
type stormResult struct {
	delivered  int
	maxGap     time.Duration
	stalled    time.Duration // the sum of the pauses over 50 ms
	overloaded int64
}

// retryStorm runs n goroutines casting to the child's Probe.Tick for d,
// each retrying at once whatever it got (ErrOverloaded under fail-fast, as
// a naive caller does), through a fresh client with the given overflow
// policy and small queue limits.
func retryStorm(t *testing.T, child *childproc.Child, n int, d time.Duration, policy batchclient.Overflow) stormResult {
	t.Helper()
	c := newClient(t, batchclient.WithQueueLimits(queueEntries, queueBytes), batchclient.WithOverflow(policy))
	connect(t, c, child.Addr())
	var stats childproc.TickStats
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), child.Addr(), "Probe", "Ticks", &testsvc.Args{}, &stats))

	var overloaded, other atomic.Int64
	start, stop := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := casters(n, start, stop, func() bool {
		err := c.Cast(ctx, child.Addr(), "Probe", "Tick", &testsvc.Args{A: 1})
		switch {
		case err == nil:
		case errors.Is(err, batchclient.ErrOverloaded):
			overloaded.Add(1)
		case ctx.Err() != nil:
			return false
		default:
			if other.Add(1) == 1 {
				t.Logf("first unexpected error: %v", err)
			}
			return false
		}
		return true
	})
	close(start)
	time.Sleep(d)
	close(stop)
	// Blocked casters wait for room until their context ends.
	cancel()
	wait()
	require.Zero(t, other.Load())
	// The lane's queue may still hold the storm's casts: under fail-fast
	// a call is refused with ErrOverloaded until it has room, as a cast
	// is (a stress round beside a second make test met it).
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Call(ctxT(t, 10*time.Second), child.Addr(), "Probe", "Ticks", &testsvc.Args{}, &stats)
		if errors.Is(err, batchclient.ErrOverloaded) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		require.NoError(t, err)
		break
	}
	return stormResult{delivered: stats.Ticks, maxGap: time.Duration(stats.MaxGap), stalled: time.Duration(stats.Stalled), overloaded: overloaded.Load()}
}

// 50,000 goroutines casting under OverflowFailFast and retrying at once on
// ErrOverloaded (what naive callers do) must not take the lane's turn: the
// writer keeps shipping frames, and the casts are delivered at least at
// the rate the same storm gets under OverflowBlock, where the callers
// wait for room instead of spinning. The child (a process of its own, so
// that its scheduling is not the storm's) records when each cast arrives:
// the longest pause between two is the longest pause between two frames.
// A rejection that had to take the lane's queue lock made every spinning
// caller queue for it, and the writer behind them: pauses of seconds.
func TestRetryStormKeepsFramesFlowing(t *testing.T) {
	child := childproc.Start(t, "127.0.0.1:0")
	const storm = 3 * time.Second
	ff := retryStorm(t, child, overloadCasters, storm, batchclient.OverflowFailFast)
	bl := retryStorm(t, child, overloadCasters, storm, batchclient.OverflowBlock)
	t.Logf("retry storm, %d casters for %v: fail-fast %d casts delivered (%d ErrOverloaded), the longest pause %v, stalled %v; block %d delivered, the longest pause %v, stalled %v",
		overloadCasters, storm, ff.delivered, ff.overloaded, ff.maxGap.Round(time.Millisecond), ff.stalled.Round(time.Millisecond), bl.delivered, bl.maxGap.Round(time.Millisecond), bl.stalled.Round(time.Millisecond))
	assert.Positive(t, ff.overloaded, "the queue never filled")
	assert.Positive(t, ff.delivered, "no cast delivered under fail-fast")
	if raceEnabled {
		// Under the race detector the storm is run for its data races
		// only: the detector slows the lane's instrumented goroutines
		// more than callers parked on a channel, so that the two storms'
		// rates and pauses measure it (beside a second make test the
		// fix's fail-fast storm fell to 0.42 of the block storm's casts).
		// make test runs this test again without it for the bounds.
		return
	}
	// The bound is 200 ms, or, when the machine's load makes the block
	// storm's own longest pause (measured in the same moment) longer,
	// twice that: the spinning callers may cost no more than waiting ones.
	assert.LessOrEqual(t, ff.maxGap, max(200*time.Millisecond, 2*bl.maxGap), "frames paused while casts were queued")
	assert.GreaterOrEqual(t, ff.delivered, bl.delivered/2, "fail-fast delivered at less than half the block policy's rate")
}
