package batchserver

import (
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/stackpad"
)

func (w *workers) loop(t task) {
	ch := make(chan task, 1)
	var fc fastcodec.Codec
	if next, heavy := w.runLight(t, ch, &fc); heavy {
		w.runPadded(next, ch, &fc)
	}
}

// heavyRun is how many queued entries a worker runs back to back, between
// two parks, before it counts its load as heavy and pads its stack: a
// moment's backlog (a collection, a burst) is not a heavy load.
const heavyRun = 64

// runLight runs the entries handed to the worker, and those queued after
// them, on a stack of its own size, until the worker ends (false) or has
// run heavyRun queued entries back to back (true, with the next one): the
// load is heavy then, and the worker goes on padded (runPadded). A worker
// of a light load parks after an entry or a few, and the collector may
// shrink its stack: padded, the workers of many light clients held much of
// what the server held beyond plain rpcx.
func (w *workers) runLight(t task, ch chan task, fc *fastcodec.Codec) (task, bool) {
	for ok := true; ok; {
		w.unstarted.Add(-1)
		run := 0
		for more := true; more; t, more = w.next() {
			if run == heavyRun {
				return t, true
			}
			run++
			w.begin()
			t.run(fc)
		}
		if !w.park(ch) {
			break
		}
		t, ok = <-ch
	}
	return task{}, false
}

// runPadded is the worker under a heavy load: t, taken from the queue,
// first, then queued entries until none is left (the stack is warm, and
// no hand-off), then parked, for the rest of the worker's life, with its
// stack padded (see workers).
func (w *workers) runPadded(t task, ch chan task, fc *fastcodec.Codec) {
	var pad stackpad.SmallPad
	stackpad.TouchSmall(&pad)
	defer stackpad.TouchSmall(&pad)
	for handed := false; ; handed = true {
		if handed {
			w.unstarted.Add(-1)
		}
		for more := true; more; t, more = w.next() {
			w.begin()
			t.run(fc)
		}
		if !w.park(ch) {
			return
		}
		var ok bool
		if t, ok = <-ch; !ok {
			return
		}
	}
}

// next takes the first queued entry for the calling goroutine, done with
// its entry, if there is one.
func (w *workers) next() (task, bool) {
	w.takers.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n > 0 {
		w.stalls = 0
		return w.popLocked(), true
	}
	// Out of the takers under mu: a dispatcher queuing from here on sees
	// it, and hands its entry to a goroutine when none is left.
	w.takers.Add(-1)
	return task{}, false
}

// park puts the calling goroutine on the idle list, or reports false when
// it should end instead.
//
// The clock is read at every checkEvery-th park only (a read per entry
// showed in the server's profile): a goroutine is stamped with the time of
// the last trim, which parks under load and the janitor's looks when quiet
// keep within a second or so, so the idle timeout counts from a little
// before it parked.
func (w *workers) park(ch chan task) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.idle) >= maxIdleWorkers {
		w.live--
		return false
	}
	w.parks++
	if w.parks%checkEvery == 0 || w.lastTrim.IsZero() {
		if now := time.Now(); now.Sub(w.lastTrim) >= trimEvery {
			w.trimLocked(now)
		}
	}
	w.idle = append(w.idle, idleWorker{ch: ch, parked: w.lastTrim})
	if w.parked != nil {
		w.parked()
	}
	return true
}
