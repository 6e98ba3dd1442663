package batchclient_test

import (
	"runtime/metrics"
	"testing"
	"time"

	gometrics "github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// clientCounter reads one of c's metric counters (0 when absent).
func clientCounter(c *batchclient.Client, name string) int64 {
	if m, ok := c.Metrics().Get(name).(gometrics.Counter); ok {
		return m.Count()
	}
	return 0
}

// forcedGCs is the number of collections forced so far in this process
// (runtime.GC, debug.FreeOSMemory).
func forcedGCs() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// pollUntil polls cond every 10 ms until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientIdleMemoryReleasedOnceAfterTheLoad: with WithIdleMemoryRelease
// the client returns memory to the OS (a forced collection) once its load
// has been gone for the given time: not while calls flow (with gaps far
// shorter than that), once after the last of them (the lanes' heartbeats
// go on, and are no load), not again while the client stays quiet, and
// once more after the next burst, of casts this time.
func TestClientIdleMemoryReleasedOnceAfterTheLoad(t *testing.T) {
	const after = 700 * time.Millisecond
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithIdleMemoryRelease(after))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)
	releases := func() int64 { return clientCounter(c, "rpcxbatch.client.memory_releases") }
	calls := func() {
		concurrently(t, 200, func(i int) error {
			var r testsvc.Reply
			return c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r)
		})
	}

	// Calls flow for 4 × after, a burst every 20 ms at most. The load is
	// gone from the moment the last burst began: its calls are counted as
	// they are made, not as they return.
	var quietSince time.Time
	for end := time.Now().Add(4 * after); time.Now().Before(end); {
		quietSince = time.Now()
		calls()
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, releases(), "memory released while calls flowed")

	forced := forcedGCs()
	require.True(t, pollUntil(10*time.Second, func() bool { return releases() == 1 }),
		"releases %d, %v after the load", releases(), time.Since(quietSince))
	require.GreaterOrEqual(t, time.Since(quietSince), after, "released before the load had been gone long enough")
	require.Greater(t, forcedGCs(), forced, "a release forces a collection")

	// Quiet on: no second release.
	time.Sleep(3 * after)
	require.EqualValues(t, 1, releases(), "released again with no load in between")

	concurrently(t, 200, func(i int) error {
		return c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2})
	})
	require.True(t, pollUntil(10*time.Second, func() bool { return releases() == 2 }),
		"releases %d after a burst of casts", releases())
}

// TestClientIdleMemoryReleaseOff: without the option the client never
// forces a collection after its load, and has no such metric.
func TestClientIdleMemoryReleaseOff(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	require.Zero(t, c.Options().IdleMemoryRelease)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
	require.Nil(t, c.Metrics().Get("rpcxbatch.client.memory_releases"))
}

// TestClientIdleMemoryReleaseOption: a negative time is refused; a
// registry shared with an earlier client keeps counting both clients'
// calls on the same counter when the second watches its load.
func TestClientIdleMemoryReleaseOption(t *testing.T) {
	_, err := batchclient.New(batchclient.WithIdleMemoryRelease(-time.Second))
	require.ErrorIs(t, err, batchclient.ErrInvalidOption)

	addr, _ := startServer(t, false)
	reg := gometrics.NewRegistry()
	first := newClient(t, batchclient.WithMetrics(reg))
	waitConnected(t, first, addr)
	ctx := ctxT(t, 30*time.Second)
	var r testsvc.Reply
	require.NoError(t, first.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
	second := newClient(t, batchclient.WithMetrics(reg), batchclient.WithIdleMemoryRelease(time.Minute))
	waitConnected(t, second, addr)
	require.NoError(t, second.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
	require.NoError(t, first.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
	require.EqualValues(t, 3, clientCounter(second, "rpcxbatch.client.calls"))
}

// TestClientIdleMemoryReleaseWatchesItsOwnCalls: the watch is of the
// client's own load, as the option says. A second client on the same
// registry that keeps calling does not hold back the release of one that
// has gone quiet, and its calls are still counted on the shared counters.
func TestClientIdleMemoryReleaseWatchesItsOwnCalls(t *testing.T) {
	const after = 300 * time.Millisecond
	addr, _ := startServer(t, false)
	reg := gometrics.NewRegistry()
	quiet := newClient(t, batchclient.WithMetrics(reg), batchclient.WithIdleMemoryRelease(after))
	busy := newClient(t, batchclient.WithMetrics(reg))
	waitConnected(t, quiet, addr)
	waitConnected(t, busy, addr)
	ctx := ctxT(t, 30*time.Second)
	var r testsvc.Reply
	require.NoError(t, quiet.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
	released := false
	for end := time.Now().Add(10 * after); time.Now().Before(end) && !released; {
		require.NoError(t, busy.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
		released = clientCounter(quiet, "rpcxbatch.client.memory_releases") == 1
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, released, "the quiet client did not release while another client on its registry called")
	require.Greater(t, clientCounter(busy, "rpcxbatch.client.calls"), int64(2))
}

// TestClientIdleMemoryReleaseEndsWithClose: Close ends the watch; a
// client closed right after its load never releases.
func TestClientIdleMemoryReleaseEndsWithClose(t *testing.T) {
	const after = 200 * time.Millisecond
	addr, _ := startServer(t, false)
	c := newClient(t, batchclient.WithIdleMemoryRelease(after))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 2}, &r))
	require.NoError(t, c.Close())
	time.Sleep(4 * after)
	require.Zero(t, clientCounter(c, "rpcxbatch.client.memory_releases"), "released after Close")
}
