package batchserver

import (
	"runtime"
	"time"
)

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
	// minQueueCap, every second.
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
