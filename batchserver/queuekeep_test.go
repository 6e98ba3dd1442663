package batchserver

import (
	"testing"
	"time"
)

// TestQueueKeptWhileNeeded: the workers' queue of entries, grown by a
// load that fills it between every two trims, is kept across the trims
// that find it empty, and let go only by a trim after a second in which
// it was not needed. Before, a trim that found it empty let it go at once,
// so under a steady load that empties it often the queue was grown again,
// from 64 tasks by doublings, every second: 7.5 MB, ~15 bytes per served
// entry, in the lock benchmark (design 1, per node).
func TestQueueKeptWhileNeeded(t *testing.T) {
	const burst = 8 * keptQueueCap
	var w workers
	now := time.Now()
	fill := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for range burst {
			w.pushLocked(task{})
		}
		for w.n > 0 {
			w.popLocked()
		}
	}
	fill()
	room := &w.queue[0]
	for i := range 3 {
		now = now.Add(trimEvery)
		w.trim(now)
		if len(w.queue) == 0 || &w.queue[0] != room {
			t.Fatalf("trim %d let the queue go while each second filled it with %d entries", i+1, burst)
		}
		fill()
		if &w.queue[0] != room {
			t.Fatalf("the queue was grown again after trim %d", i+1)
		}
	}
	// A second without use since the last trim: let go.
	w.trim(now.Add(trimEvery))
	w.trim(now.Add(2 * trimEvery))
	if w.queue != nil {
		t.Fatalf("the queue (room %d) is kept after a second unused", len(w.queue))
	}
}
