package batchserver

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

const (
	// maxIdleWorkers bounds the goroutines kept parked for reuse.
	maxIdleWorkers = 16384
	// idleWorkerTimeout is how long a parked goroutine is kept unused
	// before it ends.
	idleWorkerTimeout = 10 * time.Second
	// trimEvery is how often parked goroutines are checked for age and
	// for need.
	trimEvery = time.Second
	// checkEvery is how many parks go between two looks at the clock.
	checkEvery = 16
	// keptQueueCap is the largest queue kept while it is empty; a larger
	// one, left by a burst, is let go at the first trim after a second
	// that needed no more than a quarter of it.
	keptQueueCap = 1024
	// minQueueCap is the room of a fresh queue (a power of two).
	minQueueCap = 64
	// maxStallShift bounds the goroutines begin makes at once to
	// 1<<maxStallShift.
	maxStallShift = 3
)

// task is one call or cast entry to run.
type task struct {
	c  *conn
	e  *codec.Entry
	ec *entryCtx // nil until it runs, when the server has no request hooks
	// fr is the entry's frame (bytewindow.go), which also knows when it
	// was read: a queued task is four words.
	fr *frameHold
}

// run runs the task on a worker, with the worker's own codec.
func (t task) run(fc *fastcodec.Codec) {
	if t.ec == nil {
		t.ec = entryContext(t.c, t.e, t.fr.arrived, t.fr)
	}
	// Read first: a call's reply may finish its frame, whose entries then
	// go back to their pool (frameDone).
	cast := t.e.Kind == codec.KindCast
	t.c.p.runCall(t.c, t.ec, t.e, fc)
	if cast {
		t.c.credit(t.fr)
	}
}

// workers runs call and cast entries on reused goroutines. Each entry runs
// alone on a goroutine while it runs, as rpcx runs each request, so a slow
// handler delays no other entry; but that goroutine, and the stack it grew,
// then takes the next entry instead of a new one growing its own. Entries
// that only wait for a processor wait in a queue, a task each (see run).
//
// As many parked goroutines are kept as the busiest moment of the last
// seconds needed (a frame of a thousand entries otherwise makes them
// anew), up to maxIdleWorkers; the need halves each second once the load
// is gone (trim), one unused for idleWorkerTimeout ends, and the last
// connection's close and Plugin.Close end them all. A worker under a heavy
// load pads its stack with a stackpad.SmallPad, half the lanes' Pad
// (runPadded). A pond pool (server.WithPool's) in their place was no
// cheaper, and does not queue.
type workers struct {
	// unstarted counts entries handed to a goroutine that has not yet
	// begun to run them; queued is n, read without mu;
	// takers counts the goroutines that will look at the queue before
	// they run anything else: those handed an entry and not yet begun,
	// and those between two entries (see run).
	unstarted, queued, takers atomic.Int64

	mu   sync.Mutex   // guards the fields below
	idle []idleWorker // oldest parked first
	// queue holds the n entries waiting for a goroutine, first at head,
	// in a ring: its room is a power of two, grown only when full, so it
	// follows the most entries queued at once (bounded by the lanes'
	// windows), not the entries that passed through it while it never
	// emptied (see pushLocked).
	queue   []task
	head, n int
	// mostQueue is the most room the queue had so far; queuePeak the
	// most entries queued at once since the last trim.
	mostQueue, queuePeak int
	// procs is runtime.GOMAXPROCS, read again at each trim (it can
	// change while the process runs).
	procs int
	// stalls counts the goroutines made by begin (in powers of two)
	// since a goroutine last finished an entry and took the next.
	stalls int
	// live is the goroutines started and not ended, parked or busy;
	// peak is the most of them busy at once since the last trim, and need
	// the parked goroutines a trim keeps (see workers).
	live, peak, need int
	// most is the most goroutines live at once so far.
	most int
	// lastTrim is when the last trim ran: parked goroutines are stamped
	// with it (see park), which counts parks.
	lastTrim time.Time
	parks    uint64
	closed   bool

	// parked, when set, is called as a goroutine parks (with mu held):
	// the plugin's janitor then trims the parked on its own clock.
	parked func()
}

// idleWorker is a parked goroutine: a task sent on ch runs on it, and a
// closed ch ends it.
type idleWorker struct {
	ch     chan task
	parked time.Time
}

// waiting is the number of entries (calls and casts, of every connection)
// handed out or queued and not yet begun: for settle.Settle, replies that
// may be on their way.
func (w *workers) waiting() int { return int(w.unstarted.Load() + w.queued.Load()) }

// run runs t: on a goroutine of its own when no goroutine of the workers
// is free to take it up, else after the goroutine that takes it from the
// queue has run what it runs now.
//
// A queued entry costs a task, not a stack. It is taken up by a taker: a
// goroutine handed an entry and not yet begun (it runs the queue after its
// own entry) or one between two entries (it looks at the queue before it
// parks). An entry is queued only while a taker exists, and the last taker
// hands the next queued entry on as it begins its own (begin), so a
// handler that blocks never holds up a queued entry: each gets a goroutine
// of its own, as with rpcx. Handlers that compute for longer than a
// scheduling round look blocked too, and the goroutines then grow towards
// the entries in progress, which the lanes' windows bound.
func (w *workers) run(t task) {
	w.mu.Lock()
	if w.takers.Load() == 0 {
		h := w.handoffLocked(t)
		w.mu.Unlock()
		w.send(h)
		return
	}
	w.pushLocked(t)
	// The last taker may have begun an entry since the check, before the
	// entry was queued (begin looks at queued after it counts itself out
	// of takers; here takers is read after queued has counted the entry).
	if w.takers.Load() == 0 {
		h := w.handoffLocked(w.popLocked())
		w.mu.Unlock()
		w.send(h)
		return
	}
	w.mu.Unlock()
}

// handoff is a task on its way to the goroutine that will run it: a
// parked one (ch), or a new one (ch nil).
type handoff struct {
	t  task
	ch chan task
}

// handoffLocked picks the goroutine for t, with w.mu held: the caller
// unlocks it and then sends the handoff (send), so that no one waits on
// w.mu while a parked goroutine is woken or a new one is started.
func (w *workers) handoffLocked(t task) handoff {
	w.unstarted.Add(1)
	w.takers.Add(1)
	h := handoff{t: t}
	if n := len(w.idle); n > 0 {
		// The most recently parked: its stack is the likeliest to be warm.
		h.ch = w.idle[n-1].ch
		w.idle[n-1] = idleWorker{}
		w.idle = w.idle[:n-1]
	} else {
		w.live++
		w.most = max(w.most, w.live)
	}
	w.notePeakLocked()
	return h
}

// send gives h's task to its goroutine; w.mu is not held.
func (w *workers) send(h handoff) {
	if h.ch != nil {
		h.ch <- h.t
		return
	}
	go w.loop(h.t)
}

// begin counts the calling goroutine out of the takers as it begins an
// entry; when it was the last, the next queued entry goes to a goroutine
// of its own (see run): at once to a parked goroutine while no more
// goroutines are busy than there are processors (a wake-up, no memory, and
// a frame of a few entries runs side by side), otherwise only after a
// yield.
//
// The goroutines inside entries may only be waiting for a processor, or
// for a lock one of them holds, and be takers again in a moment: the
// caller yields to them once, and hands the entry on only if the queue
// still has no taker. Making or waking one at once, however many were
// busy, made each goroutine that began behind a busy lock (or a
// collection's assist) start another: hundreds where a few ran the queue.
func (w *workers) begin() {
	if w.takers.Add(-1) > 0 || w.queued.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.procs == 0 {
		w.procs = runtime.GOMAXPROCS(0)
	}
	if w.n > 0 && w.takers.Load() == 0 && len(w.idle) > 0 && w.live-len(w.idle) <= w.procs {
		h := w.handoffLocked(w.popLocked())
		w.mu.Unlock()
		w.send(h)
		return
	}
	w.mu.Unlock()
	runtime.Gosched()
	if w.takers.Load() > 0 || w.queued.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.n == 0 || w.takers.Load() > 0 {
		w.mu.Unlock()
		return
	}
	// Held up again with no entry finished since the last time: twice as
	// many goroutines as then, up to 8, so that a burst of entries whose
	// handlers all block gets its goroutines faster than one a round (a
	// round is a yield, long on a busy machine). Not more: a collection's
	// assists hold every goroutine up for a while too, and 1,024 at once
	// brought the peak back to a thousand goroutines.
	n := 1 << w.stalls
	w.stalls = min(w.stalls+1, maxStallShift)
	for ; n > 0 && w.n > 0; n-- {
		h := w.handoffLocked(w.popLocked())
		w.mu.Unlock()
		w.send(h)
		w.mu.Lock()
	}
	w.mu.Unlock()
}

// notePeakLocked records how many goroutines are busy now in the peak.
func (w *workers) notePeakLocked() {
	w.peak = max(w.peak, w.live-len(w.idle))
}
