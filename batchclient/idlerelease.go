package batchclient

import (
	"fmt"
	"time"

	metrics "github.com/rcrowley/go-metrics"

	"github.com/rpcxbatch/rpcxbatch/internal/idlemem"
)

// WithIdleMemoryRelease makes the client return the process's free memory
// to the OS once its load has been gone for after, as the server plugin's
// batchserver.WithIdleMemoryRelease does on its side: once no call, cast
// or send has been made through the client for after (within a quarter of
// it), it calls debug.FreeOSMemory, once; the next call starts the watch
// anew. Without it (the default) what a burst leaves behind stays with the
// process until the runtime's next collection (docs/operations.md).
//
// The cost is one full collection and the scavenging of the free heap per
// burst; while the load goes on, each call reads one flag. The release is
// of the whole process's memory, though only this client's calls are
// watched; Close ends the watch. The releases are counted on the metric
// rpcxbatch.client.memory_releases of the client's registry. A negative
// after is an ErrInvalidOption; 0 turns it off.
func WithIdleMemoryRelease(after time.Duration) Option {
	return func(o *Options) { o.IdleMemoryRelease = after }
}

// checkIdleRelease refuses a negative o.IdleMemoryRelease.
func checkIdleRelease(o *Options) error {
	if o.IdleMemoryRelease < 0 {
		return fmt.Errorf("%w: IdleMemoryRelease %v is negative (0 turns the release off)", ErrInvalidOption, o.IdleMemoryRelease)
	}
	return nil
}

// newIdleRelease returns the watch for o.IdleMemoryRelease, or nil when
// it is off (a nil watch's Touch and Stop do nothing).
func newIdleRelease(o *Options) *idlemem.Watch {
	if o.IdleMemoryRelease <= 0 {
		return nil
	}
	released := metrics.GetOrRegisterCounter("rpcxbatch.client.memory_releases", o.Registry)
	return idlemem.New(o.IdleMemoryRelease, nil, func() { released.Inc(1) })
}
