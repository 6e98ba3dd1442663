package batchserver_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestIdleMemoryReleasedOnceAfterTheLoad: with WithIdleMemoryRelease the
// plugin returns memory to the OS once the load has been gone for the
// given time: not while calls flow (with gaps far shorter than that), once
// after the last of them (the lanes' heartbeats go on, and are no load),
// not again while the server stays quiet, and once more after the next
// burst.
func TestIdleMemoryReleasedOnceAfterTheLoad(t *testing.T) {
	const after = 700 * time.Millisecond
	addr, _, p := startServer(t, batchserver.WithIdleMemoryRelease(after))
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)
	releases := func() int64 { return counter(t, p.Metrics(), "rpcxbatch.server.memory_releases") }
	burst := func() {
		concurrently(t, 200, func(i int) error {
			var r testsvc.Reply
			return c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r)
		})
	}

	// Calls flow for 4 × after, a burst every 20 ms at most.
	for end := time.Now().Add(4 * after); time.Now().Before(end); {
		burst()
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, releases(), "memory released while calls flowed")

	quietSince := time.Now()
	require.True(t, eventually(10*time.Second, func() bool { return releases() == 1 }),
		"releases %d, %v after the load", releases(), time.Since(quietSince))
	require.GreaterOrEqual(t, time.Since(quietSince), after/2, "released before the load had been gone long enough")

	// Quiet on: no second release.
	time.Sleep(3 * after)
	require.EqualValues(t, 1, releases(), "released again with no load in between")

	burst()
	require.True(t, eventually(10*time.Second, func() bool { return releases() == 2 }),
		"releases %d after a second burst", releases())
}

// TestIdleMemoryReleaseOption: off by default; a negative time is refused.
func TestIdleMemoryReleaseOption(t *testing.T) {
	_, p := newServer(t)
	require.Zero(t, p.Options().IdleMemoryRelease)
	_, err := batchserver.New(server.NewServer(), batchserver.WithIdleMemoryRelease(-time.Second))
	require.ErrorIs(t, err, batchserver.ErrInvalidOption)
}
