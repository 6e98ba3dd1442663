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
// process's memory, not only the client's. A client closed before its load
// has been gone for after still releases once, after it. The number of
// releases is the metric rpcxbatch.client.memory_releases. A negative
// after is an ErrInvalidOption; 0 turns it off.
func WithIdleMemoryRelease(after time.Duration) Option {
	return func(o *Options) { o.IdleMemoryRelease = after }
}

// The client's entry points count every call, cast and send on the
// counters named here (metrics.go); the idle release watches the load by
// registering those counters first, as counters that also note the
// activity, so that the call path needs nothing else.
var idleWatchedCounters = []string{"rpcxbatch.client.calls", "rpcxbatch.client.casts", "rpcxbatch.client.sends"}

// idleReleaseChecks is how many times per after the watch looks: the
// release comes between after and after × (1 + 1/idleReleaseChecks) past
// the last call.
const idleReleaseChecks = 4

// setupIdleRelease validates o.IdleMemoryRelease and, when it is positive,
// puts the watch on o.Registry's entry counters. It runs once the registry
// is set.
func setupIdleRelease(o *Options) error {
	if o.IdleMemoryRelease < 0 {
		return fmt.Errorf("%w: IdleMemoryRelease %v is negative (0 turns the release off)", ErrInvalidOption, o.IdleMemoryRelease)
	}
	if o.IdleMemoryRelease == 0 {
		return nil
	}
	r := &idleRelease{every: o.IdleMemoryRelease / idleReleaseChecks,
		released: metrics.GetOrRegisterCounter("rpcxbatch.client.memory_releases", o.Registry)}
	for _, name := range idleWatchedCounters {
		inner, ok := o.Registry.Get(name).(metrics.Counter)
		if !ok {
			inner = metrics.NewCounter()
		}
		// A registry shared with an earlier client keeps its counts: the
		// watch wraps the counter that is there, which that client keeps
		// counting on.
		o.Registry.Unregister(name)
		if err := o.Registry.Register(name, activityCounter{Counter: inner, r: r}); err != nil {
			return fmt.Errorf("%w: metrics registry refused %s: %w", ErrInvalidOption, name, err)
		}
	}
	return nil
}

// activityCounter is a metrics counter that also notes each increment as
// load for its idle release.
type activityCounter struct {
	metrics.Counter
	r *idleRelease
}

// Inc counts and notes the activity.
func (c activityCounter) Inc(n int64) {
	c.Counter.Inc(n)
	c.r.touch()
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

	mu    sync.Mutex // guards t and quiet
	t     *time.Timer
	quiet int // checks in a row that saw no call
}

// touch notes a call and arms the timer if it is not running. While calls
// flow it costs two atomic loads: no clock read, no shared write.
func (r *idleRelease) touch() {
	if !r.active.Load() {
		r.active.Store(true)
	}
	if r.armed.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed.Load() {
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
