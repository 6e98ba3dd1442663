package batchclient

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
)

// WithIdleMemoryRelease makes the client return the process's free memory
// to the OS once its load has been gone for after, as the server plugin's
// batchserver.WithIdleMemoryRelease does on its side: once no call, cast
// or send has been made through the client for after (within a quarter of
// it), it calls debug.FreeOSMemory, once; the next call starts the watch
// anew. Without it (the default) the client never forces a collection, and
// what a burst leaves behind (the stacks of the callers' goroutines that
// have ended, the heap the collector has freed, the garbage of the burst
// not yet collected) stays with the process until the runtime's next
// collection, which in a process that allocates nothing comes with the
// forced collection every two minutes.
//
// The cost is one full collection, with the world stopped for a moment and
// the heap scanned, and the scavenging of the free heap, per burst; while
// the load goes on, each call reads one flag. The release is of the whole
// process's memory, though only this client's calls are watched, and only
// their start: a call still in flight after that long (a slow handler)
// does not hold the release back. Close ends the watch: a client closed
// before its load has been gone for after does not release. The releases
// are counted on the metric rpcxbatch.client.memory_releases of the
// client's registry (clients sharing a registry share the counter). A
// negative after is an ErrInvalidOption; 0 turns it off.
func WithIdleMemoryRelease(after time.Duration) Option {
	return func(o *Options) { o.IdleMemoryRelease = after }
}

// idleReleaseChecks is how many times per after the watch looks: the
// release comes between after and after × (1 + 1/idleReleaseChecks) past
// the last call.
const idleReleaseChecks = 4

// checkIdleRelease refuses a negative o.IdleMemoryRelease.
func checkIdleRelease(o *Options) error {
	if o.IdleMemoryRelease < 0 {
		return fmt.Errorf("%w: IdleMemoryRelease %v is negative (0 turns the release off)", ErrInvalidOption, o.IdleMemoryRelease)
	}
	return nil
}

// newIdleRelease returns the watch for o.IdleMemoryRelease, or nil when
// it is off (a nil watch's touch and stop do nothing).
func newIdleRelease(o *Options) *idleRelease {
	if o.IdleMemoryRelease <= 0 {
		return nil
	}
	return &idleRelease{every: o.IdleMemoryRelease / idleReleaseChecks,
		released: metrics.GetOrRegisterCounter("rpcxbatch.client.memory_releases", o.Registry)}
}

// idleRelease returns free memory to the OS once the client's load has
// been gone for idleReleaseChecks × every. Its timer runs only while load
// may be going on: armed by the first call after a release, it ends after
// the release. Nothing else is running meanwhile.
type idleRelease struct {
	every time.Duration
	// released counts the releases (metric memory_releases).
	released metrics.Counter

	// active is set by each call and cleared by each check; armed is set
	// while the timer runs.
	active atomic.Bool
	armed  atomic.Bool

	mu     sync.Mutex // guards t, quiet and closed
	t      *time.Timer
	quiet  int  // checks in a row that saw no call
	closed bool // set by stop: the timer is not armed again
}

// touch notes a call and arms the timer if it is not running. While calls
// flow it costs two atomic loads: no clock read, no shared write.
func (r *idleRelease) touch() {
	if r == nil {
		return
	}
	if !r.active.Load() {
		r.active.Store(true)
	}
	if r.armed.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed.Load() || r.closed {
		return
	}
	r.armed.Store(true)
	r.quiet = 0
	if r.t == nil {
		r.t = time.AfterFunc(r.every, r.check)
	} else {
		r.t.Reset(r.every)
	}
}

// check runs on the timer: after idleReleaseChecks quiet checks in a row
// it releases the memory and disarms; else it looks again later.
func (r *idleRelease) check() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if r.active.Swap(false) {
		r.quiet = 0
	} else {
		r.quiet++
	}
	if r.quiet < idleReleaseChecks {
		r.t.Reset(r.every)
		r.mu.Unlock()
		return
	}
	// Disarmed before active is read again: a call made now either is
	// seen here or sees the timer disarmed and arms it anew.
	r.armed.Store(false)
	if r.active.Load() {
		r.armed.Store(true)
		r.quiet = 0
		r.t.Reset(r.every)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	debug.FreeOSMemory()
	r.released.Inc(1)
}

// stop ends the watch for good (Client.Close): the timer is stopped and
// never armed again. A release already running completes.
func (r *idleRelease) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	// armed stays set, so that touch returns at its first check without
	// taking mu.
	r.armed.Store(true)
	if r.t != nil {
		r.t.Stop()
	}
}
