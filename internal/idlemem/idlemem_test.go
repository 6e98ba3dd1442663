package idlemem

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitFor polls cond every 5 ms until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchReleasesOncePerBurst: no release while touches come, one after
// the quiet time (not before it), none while quiet goes on, one more after
// the next touch.
func TestWatchReleasesOncePerBurst(t *testing.T) {
	const after = 200 * time.Millisecond
	var n atomic.Int64
	w := New(after, nil, func() { n.Add(1) })
	defer w.Stop()
	var last time.Time
	for end := time.Now().Add(3 * after); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		last = time.Now()
		w.Touch()
	}
	require.Zero(t, n.Load(), "released while touched")
	require.True(t, waitFor(10*after, func() bool { return n.Load() == 1 }))
	require.GreaterOrEqual(t, time.Since(last), after, "released before the quiet time")
	time.Sleep(2 * after)
	require.EqualValues(t, 1, n.Load(), "released again with no touch")
	w.Touch()
	require.True(t, waitFor(10*after, func() bool { return n.Load() == 2 }))
}

// TestWatchWaitsWhileBusy: busy load without touches holds the release
// back; it comes once busy ends.
func TestWatchWaitsWhileBusy(t *testing.T) {
	const after = 100 * time.Millisecond
	var n atomic.Int64
	var busy atomic.Bool
	busy.Store(true)
	w := New(after, busy.Load, func() { n.Add(1) })
	defer w.Stop()
	w.Touch()
	time.Sleep(4 * after)
	require.Zero(t, n.Load(), "released while busy")
	busy.Store(false)
	require.True(t, waitFor(10*after, func() bool { return n.Load() == 1 }))
}

// TestWatchStop: a stopped watch never releases, and a nil one does
// nothing.
func TestWatchStop(t *testing.T) {
	const after = 100 * time.Millisecond
	var n atomic.Int64
	w := New(after, nil, func() { n.Add(1) })
	w.Touch()
	w.Stop()
	w.Touch()
	time.Sleep(3 * after)
	require.Zero(t, n.Load(), "released after Stop")
	var none *Watch
	none.Touch()
	none.Stop()
}

// TestWatchTinyAfterLooksAtMostOnceAMillisecond: an after of a
// nanosecond does not make the timer fire back to back while touches
// come: it looks at most once a millisecond, and still releases.
func TestWatchTinyAfterLooksAtMostOnceAMillisecond(t *testing.T) {
	var n atomic.Int64
	w := New(time.Nanosecond, nil, func() { n.Add(1) })
	defer w.Stop()
	require.Equal(t, minEvery, w.every)
	w.Touch()
	require.True(t, waitFor(time.Second, func() bool { return n.Load() == 1 }))
}
