package settle

import "runtime"

// MaxYields bounds how often Settle yields, which bounds the latency it can
// add to a frame when the queue keeps growing. A yield puts the writer on
// the global run queue, which the scheduler looks at every 61 goroutines
// or so: eight yields let a frame's worth of readied goroutines (several
// hundred) queue; two gave frames too small.
const MaxYields = 8

// Settle yields the processor while queued() keeps growing or onTheWay()
// is positive, up to MaxYields times, and returns as soon as neither holds
// or the queue reaches full. onTheWay counts goroutines that are runnable
// and may queue work when they run (callers woken with a reply, entries
// handed to a goroutine not yet started); nil means none are tracked. It
// never sleeps and never waits for work that is not already on its way:
// with nothing else runnable, each yield returns at once and so does
// Settle.
//
// A writer woken by a channel send runs next on its P, ahead of the
// goroutines readied alongside it (callers woken by the same reply frame,
// handlers of the same batch). Without this, it would ship a frame of one
// or two entries while the rest queue a moment later.
func Settle(queued func() int, full int, onTheWay func() int) {
	prev := queued()
	for i := 0; i < MaxYields && prev < full; i++ {
		runtime.Gosched()
		n := queued()
		if n == prev && (onTheWay == nil || onTheWay() <= 0) {
			return
		}
		prev = n
	}
}
