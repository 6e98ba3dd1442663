package batchserver

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// What a burst leaves behind once it is over is mostly the Go runtime's,
// not the plugin's: the stacks of goroutines that have ended and heap the
// collector has freed, which the runtime gives back to the OS only after
// its next collection, and a process that allocates nothing after the
// burst collects next at the runtime's forced collection, every two
// minutes. The plugin never forces a collection by default. With
// WithIdleMemoryRelease it does, once per burst: when no batch frame has
// arrived for the given time and no entry runs, it calls
// debug.FreeOSMemory.

// idleRelease returns free memory to the OS once the plugin's load has
// been gone for after (see WithIdleMemoryRelease). Its timer runs only
// while load may be going on: armed by the first frame after a release,
// it ends after the release, and Plugin.Close stops it.
type idleRelease struct {
	after time.Duration
	// busy reports entries still running or queued.
	busy func() bool
	// released counts the releases (metric memory_releases).
	released interface{ Inc(int64) }

	// last is when the last frame arrived (UnixNano); armed is set while
	// the timer runs.
	last  atomic.Int64
	armed atomic.Bool

	mu     sync.Mutex // guards t and closed
	t      *time.Timer
	closed bool
}

// touch notes a frame that arrived at now, and arms the timer if it is
// not running. It costs a frame an atomic store and load.
func (r *idleRelease) touch(now time.Time) {
	r.last.Store(now.UnixNano())
	if r.armed.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.armed.Load() {
		return
	}
	r.armed.Store(true)
	r.t = time.AfterFunc(r.after, r.check)
}

// check runs on the timer: when the load has been gone for after, it
// releases the memory and disarms; else it looks again when it may have.
func (r *idleRelease) check() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if wait := r.after - time.Since(time.Unix(0, r.last.Load())); wait > 0 || r.busy() {
		r.t.Reset(max(wait, r.after/8))
		r.mu.Unlock()
		return
	}
	// Disarmed before last is read again: a frame that arrives now either
	// is seen here or sees the timer disarmed and arms it anew.
	r.armed.Store(false)
	if time.Since(time.Unix(0, r.last.Load())) < r.after {
		r.armed.Store(true)
		r.t.Reset(r.after)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	debug.FreeOSMemory()
	r.released.Inc(1)
}

// stop stops the timer for good; a check already running completes.
func (r *idleRelease) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.t != nil {
		r.t.Stop()
	}
}
