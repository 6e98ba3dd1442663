// Package idlemem returns a process's free memory to the OS once a load
// has been gone for a while: the watch behind batchclient's and
// batchserver's WithIdleMemoryRelease.
//
// What a burst leaves behind once it is over is mostly the Go runtime's:
// the stacks of goroutines that have ended and heap the collector has
// freed, which the runtime gives back to the OS only after its next
// collection; a process that allocates nothing after the burst collects
// next at the runtime's forced collection, every two minutes. A Watch
// calls debug.FreeOSMemory once per burst instead.
//
// A Watch starts no goroutine of its own: its timer's function runs only
// while load may be going on (armed by the first Touch after a release, it
// ends after the release), and Stop ends it for good.
package idlemem

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// checks is how many times per after a Watch looks: the release comes
// between after and after × (1 + 1/checks) past the last Touch.
const checks = 4

// minEvery is the shortest time between two looks.
const minEvery = time.Millisecond

// Watch releases free memory once no Touch has come for its after and
// its busy function (if any) reports nothing running.
type Watch struct {
	every time.Duration
	// busy reports load still going on without touches (entries running
	// or queued); nil means none.
	busy func() bool
	// release returns the memory; debug.FreeOSMemory, and the caller's
	// count of releases.
	release func()

	// active is set by each Touch and cleared by each check; armed is set
	// while the timer runs (and for good once stopped).
	active atomic.Bool
	armed  atomic.Bool

	mu     sync.Mutex // guards t, quiet and closed
	t      *time.Timer
	quiet  int  // checks in a row that saw no touch and nothing busy
	closed bool // set by Stop: the timer is not armed again
}

// New returns a Watch that, once after has passed with no Touch and busy
// (which may be nil) false, calls debug.FreeOSMemory and then released
// (which may be nil), once per burst. after must be positive; below 4 ms
// the release comes 4 ms after the last Touch at the earliest.
func New(after time.Duration, busy func() bool, released func()) *Watch {
	// A tiny after would make the timer fire back to back while the load
	// flows: it looks at most once a millisecond.
	return &Watch{every: max(after/checks, minEvery), busy: busy, release: func() {
		debug.FreeOSMemory()
		if released != nil {
			released()
		}
	}}
}

// Touch notes load, and arms the timer if it is not running. While load
// flows it costs two atomic loads: no clock read, no shared write. A nil
// Watch does nothing.
func (w *Watch) Touch() {
	if w == nil {
		return
	}
	if !w.active.Load() {
		w.active.Store(true)
	}
	if w.armed.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed.Load() || w.closed {
		return
	}
	w.armed.Store(true)
	w.quiet = 0
	if w.t == nil {
		w.t = time.AfterFunc(w.every, w.check)
	} else {
		w.t.Reset(w.every)
	}
}

// check runs on the timer: after checks quiet looks in a row it releases
// the memory and disarms; else it looks again later.
func (w *Watch) check() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	if w.active.Swap(false) || (w.busy != nil && w.busy()) {
		w.quiet = 0
	} else {
		w.quiet++
	}
	if w.quiet < checks {
		w.t.Reset(w.every)
		w.mu.Unlock()
		return
	}
	// Disarmed before active is read again: a Touch made now either is
	// seen here or sees the timer disarmed and arms it anew.
	w.armed.Store(false)
	if w.active.Load() {
		w.armed.Store(true)
		w.quiet = 0
		w.t.Reset(w.every)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.release()
}

// Stop ends the watch for good: the timer is stopped and never armed
// again. A release already running completes. A nil Watch does nothing.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	// armed stays set, so that Touch returns at its first look without
	// taking mu.
	w.armed.Store(true)
	if w.t != nil {
		w.t.Stop()
	}
}
