package batchserver

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/stackpad"
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
	t.c.p.runCall(t.c, t.ec, t.e, fc)
	if t.e.Kind == codec.KindCast {
		t.c.credit(t.fr, true)
	}
}

// workers runs call and cast entries on reused goroutines. Each entry still
// runs alone on a goroutine of its own while it runs, as rpcx runs each
// request, so a slow handler delays no other entry; but when it is done
// that goroutine, and the stack it grew, takes the next entry instead of a
// new goroutine being created and its stack grown again (stack growth was
// a fifth of the server's CPU with a goroutine per entry).
//
// Entries that only wait for a processor wait in a queue, not each on a
// goroutine of its own (see run): with 10,000 callers the server ran
// calls and casts on 100 to 950 goroutines instead of 2,800 to 4,300, its
// peak RSS 47-55 MB instead of 72-98 MB, at less CPU per entry (perf
// harness, batch path alone, medians of 3 alternated runs on a busy
// 2-core machine).
//
// As many goroutines are kept as the busiest moment of the last seconds
// needed, up to maxIdleWorkers: a frame of a thousand entries starts a
// thousand at once, and with fewer kept the next such frame made up the
// difference anew (with 10,000 callers, a tenth of the CPU). Once a second
// (trim, as goroutines park, and at the plugin's janitor's look) the need is
// taken anew: the most goroutines busy at once since the last check, or
// half the need before, whichever is more; parked goroutines beyond the
// need, less those busy now, end, oldest first, and so does one parked
// unused for idleWorkerTimeout. A burst so leaves its goroutines parked
// for a moment, and they end over the next seconds, halving every second,
// once the load is gone. All parked goroutines are released when the
// plugin's last connection closes and by Plugin.Close, so an idle server
// holds none.
//
// A worker under a heavy load (one that found entries queued after one it
// ran) has its stack padded with a stackpad.SmallPad (4 KiB), not the
// 8 KiB Pad of the client's lanes: a parked worker keeps its stack from
// being shrunk at every collection and grown back by its next entry, at
// half the memory. Measured side by side with 1,000 and 10,000 callers
// (perf harness, medians of 4 runs): without a pad the server spent 0.8
// to 1 µs more CPU per call or cast; with the 8 KiB pad its peak RSS with
// 10,000 callers was 101-104 MB, with 4 KiB 72-75 MB, at the same CPU.
//
// A pond pool (what rpcx's server.WithPool makes, and what the plugin uses
// when the server has one) in their place, with room for 16,384 workers,
// was no cheaper: 11.7 against 9.8 CPU µs per call at 100 callers, 13.3
// against 10.7 at 1,000 (BenchmarkCall's batch load, mean of 3 runs on a
// busy 2-core machine), and it does not queue.
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
// A goroutine for every entry handed out, as rpcx starts one for every
// request, gave every entry of every frame in flight (thousands with
// 10,000 callers) a goroutine, and a stack, at once, only to wait for its
// turn on two processors. A queued entry costs a task, not a stack. It is
// taken up by a taker: a goroutine that was handed an entry and has not
// yet begun it (it runs the queue after its own entry) or one between two
// entries (it looks at the queue before it parks). An entry is queued only
// while a taker exists, and a goroutine about to begin an entry that was
// the last taker hands the next queued entry to a goroutine of its own
// first (begin): so the queue is never left to goroutines that are all
// inside entries. A handler that blocks thus never holds up a queued
// entry, however many block: each still gets a goroutine of its own, as
// with rpcx (at once a parked one while no more goroutines are busy than
// there are processors, else after a yield, up to 8 at a time).
//
// How many goroutines that makes: those inside entries, plus a taker or
// two. A goroutine inside an entry that only waits for a processor cannot
// be told from one whose handler blocks, so what keeps the count low for
// handlers that only compute is that they finish within a scheduling
// round: the goroutine that begins as the last taker yields once, and a
// goroutine done with its entry takes the queue meanwhile (with 1,000
// goroutines parked by a burst of blocking calls, a storm of casts that
// only count ran on 5 to 15 of them at once; under the race detector on a
// machine at load 11, on 21 to 489). Handlers that compute for longer
// than a round (or are held in a collection's assist) look blocked, and
// the count then grows towards the entries in progress, bounded by the
// lanes' windows, as for handlers that block.
func (w *workers) run(t task) {
	w.mu.Lock()
	if w.takers.Load() == 0 {
		w.handLocked(t)
		return
	}
	w.pushLocked(t)
	// The last taker may have begun an entry since the check, before the
	// entry was queued (begin looks at queued after it counts itself out
	// of takers; here takers is read after queued has counted the entry).
	if w.takers.Load() == 0 {
		w.handLocked(w.popLocked())
		return
	}
	w.mu.Unlock()
}

// handLocked hands t to an idle goroutine, or to a new one, and unlocks
// w.mu.
func (w *workers) handLocked(t task) {
	w.unstarted.Add(1)
	w.takers.Add(1)
	if n := len(w.idle); n > 0 {
		// The most recently parked: its stack is the likeliest to be warm.
		ch := w.idle[n-1].ch
		w.idle[n-1] = idleWorker{}
		w.idle = w.idle[:n-1]
		w.notePeakLocked()
		w.mu.Unlock()
		ch <- t
		return
	}
	w.live++
	w.most = max(w.most, w.live)
	w.notePeakLocked()
	w.mu.Unlock()
	go w.loop(t)
}

// begin counts the calling goroutine out of the takers as it begins an
// entry; when it was the last, the next queued entry goes to a goroutine
// of its own (see run): at once to a parked goroutine while no more
// goroutines are busy than there are processors, which costs a wake-up
// and no memory (a frame of a few entries so runs them side by side, as
// before the queue); otherwise only after a yield.
//
// The goroutines inside entries may only be waiting for a processor, or
// for a lock one of them holds, and be takers again in a moment. The
// caller yields to them, once; only if the queue still has no taker then
// are they held up (by handlers that block), and a goroutine is handed
// the entry. Making one at once made each goroutine that began behind a
// busy lock (or a collection's assist) make another: hundreds where a few
// ran the queue. Waking a parked one at once, however many were busy, did
// the same with the goroutines parked: each woken one, beginning as the
// last taker while the others were inside entries, woke the next. (At
// the peak of 10,000 writers casting, perf harness on a busy 2-core
// machine: server goroutines a median of 205 over 12 runs without the
// yield first, 107 over 10 with it; 43 to 564 in single runs.) While no
// more goroutines are busy than there are processors (the caller counted),
// one may be free to run the entry, and waking costs no yield.
func (w *workers) begin() {
	if w.takers.Add(-1) > 0 || w.queued.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.procs == 0 {
		w.procs = runtime.GOMAXPROCS(0)
	}
	if w.n > 0 && w.takers.Load() == 0 && len(w.idle) > 0 && w.live-len(w.idle) <= w.procs {
		w.handLocked(w.popLocked())
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
		w.handLocked(w.popLocked())
		w.mu.Lock()
	}
	w.mu.Unlock()
}

// pushLocked queues t.
//
// A slice appended at its end and taken from its front grew by every
// entry that passed through it until it emptied, and under a storm of
// casts it never did: at the peak of 10,000 writers casting, 168,000
// tasks of room (9.4 MB, a fifth of the server's live heap) for the
// 32,768 entries the two lanes' windows let wait at most.
func (w *workers) pushLocked(t task) {
	if w.n == len(w.queue) {
		q := make([]task, max(minQueueCap, 2*len(w.queue)))
		k := copy(q, w.queue[w.head:])
		copy(q[k:], w.queue[:w.head])
		w.queue, w.head = q, 0
		w.mostQueue = max(w.mostQueue, len(q))
	}
	w.queue[(w.head+w.n)&(len(w.queue)-1)] = t
	w.n++
	w.queuePeak = max(w.queuePeak, w.n)
	w.queued.Add(1)
}

// popLocked takes the first queued entry; the queue must not be empty.
func (w *workers) popLocked() task {
	t := w.queue[w.head]
	w.queue[w.head] = task{}
	w.head = (w.head + 1) & (len(w.queue) - 1)
	w.n--
	w.queued.Add(-1)
	return t
}

// notePeakLocked records how many goroutines are busy now in the peak.
func (w *workers) notePeakLocked() {
	w.peak = max(w.peak, w.live-len(w.idle))
}

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
// shrink its stack: with 300 light clients on a server the pad was a
// megabyte of stacks, a third of what the server held beyond plain rpcx.
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
// The clock is read at every checkEvery-th park only (time.Now was 2 % of
// the server's CPU at 1,000 callers, one read per entry): a goroutine is
// stamped with the time of the last trim, which parks under load and the
// janitor's looks when quiet keep within a second or so, so the idle
// timeout counts from a little before it parked.
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

// trim ends the goroutines parked unused for idleWorkerTimeout, and those
// beyond the recent need.
func (w *workers) trim(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trimLocked(now)
}

// trimDue trims unless a trim ran less than trimEvery ago (parks trim
// too, under load): the janitor's look, once a second.
func (w *workers) trimDue(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.lastTrim) >= trimEvery*9/10 {
		w.trimLocked(now)
	}
}

func (w *workers) trimLocked(now time.Time) {
	w.lastTrim = now
	w.procs = runtime.GOMAXPROCS(0)
	// A large queue is let go once empty, but only when the last second
	// needed no more than a quarter of it: under a steady load that empties
	// it between bursts it was otherwise grown anew, by doublings from
	// minQueueCap, every second (~15 bytes per entry served).
	if w.n == 0 && len(w.queue) > keptQueueCap && w.queuePeak <= len(w.queue)/4 {
		w.queue, w.head = nil, 0
	}
	w.queuePeak = w.n
	busy := w.live - len(w.idle)
	w.need = max(w.peak, w.need/2)
	w.peak = busy
	// Those busy now park again when done: the need counts them.
	excess := len(w.idle) - max(w.need-busy, 0)
	old := 0
	for old < len(w.idle) && (old < excess || now.Sub(w.idle[old].parked) >= idleWorkerTimeout) {
		close(w.idle[old].ch)
		old++
	}
	w.live -= old
	if old > 0 {
		n := copy(w.idle, w.idle[old:])
		clear(w.idle[n:])
		w.idle = w.idle[:n]
	}
}

// release ends every parked goroutine; with closed set, later entries still
// run but their goroutines end afterwards instead of parking.
func (w *workers) release(closed bool) {
	w.mu.Lock()
	idle := w.idle
	w.idle = nil
	w.live -= len(idle)
	w.peak, w.need = w.live, 0
	w.closed = w.closed || closed
	w.mu.Unlock()
	for _, iw := range idle {
		close(iw.ch)
	}
}

// busy reports entries running or queued.
func (w *workers) busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live > len(w.idle) || w.n > 0
}

// idleCount is the number of parked goroutines.
func (w *workers) idleCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}
