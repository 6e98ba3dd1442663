package batchserver

import (
	"fmt"
	"runtime"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/server"
)

// Disabled, given to WithPoolSize, leaves the server plain: New registers
// nothing, clients' handshakes get rpcx's "can't find service" and they fall
// back to plain rpcx for this server.
const Disabled = -1

// Defaults of the server options.
const (
	// DefaultBatchCap is the most entries accepted in one frame and written
	// in one reply frame.
	DefaultBatchCap = 1000
	// DefaultMaxFrameBytes is the largest batch frame accepted and the
	// largest reply frame written (a single larger reply is still written
	// alone, up to the client's own cap).
	DefaultMaxFrameBytes = 16 << 20
	// DefaultWindow is the most entries one lane may have unfinished on the
	// server (written, and neither answered nor credited back).
	DefaultWindow = 16384
	// DefaultWindowBytes is the most bytes of batch frames one lane may
	// have unfinished on the server (see WithWindowBytes).
	DefaultWindowBytes = 8 << 20
	// DefaultWriteTimeout bounds one reply-frame write; a client that does
	// not read for this long is disconnected.
	DefaultWriteTimeout = 10 * time.Second
)

// Options configure the plugin; set them with the With functions.
type Options struct {
	// PoolSize is the number of lanes each client is asked to open.
	// 0 means runtime.GOMAXPROCS(0); Disabled leaves the server plain.
	PoolSize int
	// BatchCap is the entry cap per frame, both ways. Default 1000.
	BatchCap int
	// MaxFrameBytes is the byte cap per frame. Default 16 MiB.
	MaxFrameBytes int
	// WriteTimeout bounds each reply-frame write. Default 10 s.
	WriteTimeout time.Duration
	// Window is the most entries each lane may have unfinished here: with
	// it, what a slow handler can make the server hold is bounded by
	// lanes x Window entries per client. Default 16384; with a pool that
	// reports its bound (server.WithPool's), at most its workers plus its
	// capacity.
	Window int
	// WindowBytes is the most bytes of batch frames each lane may have
	// unfinished here (see WithWindowBytes). Default 8 MiB.
	WindowBytes int
	// Registry receives the server metrics. Default: a new registry,
	// available from Plugin.Metrics.
	Registry metrics.Registry
	// IdleMemoryRelease, when positive, returns free memory to the OS
	// once the load has been gone this long (see WithIdleMemoryRelease).
	// Default 0: never.
	IdleMemoryRelease time.Duration
	// Pool, when set, runs batched calls and casts (see WithHandlerPool).
	// Default: the rpcx server's own pool (server.WithPool,
	// server.WithCustomPool), if any.
	Pool server.WorkerPool
}

// Option sets one server option.
type Option func(*Options)

// WithPoolSize sets the lanes per client (0: GOMAXPROCS; Disabled: plain).
func WithPoolSize(n int) Option { return func(o *Options) { o.PoolSize = n } }

// WithBatchCap sets the entry cap per frame.
func WithBatchCap(n int) Option { return func(o *Options) { o.BatchCap = n } }

// WithMaxFrameBytes sets the byte cap per frame.
func WithMaxFrameBytes(n int) Option { return func(o *Options) { o.MaxFrameBytes = n } }

// WithWindow sets the most unfinished entries per lane.
func WithWindow(n int) Option { return func(o *Options) { o.Window = n } }

// WithWindowBytes sets the byte window: the most bytes of batch frames
// each lane may have unfinished here. A frame's bytes are held from its
// arrival until the last of its entries has finished (a call's reply is
// queued; a cast or send has run), since its entries alias it, and they go
// back to the lane with the credit written beside the replies. A lane may
// still write one frame larger than the window when it has nothing else
// unfinished (up to MaxFrameBytes), so that a large entry cannot stall. A
// connection that holds more than twice the window (and is not that lone
// frame) is closed with ErrByteWindowExceeded.
func WithWindowBytes(n int) Option { return func(o *Options) { o.WindowBytes = n } }

// WithWriteTimeout sets the bound on one reply-frame write.
func WithWriteTimeout(d time.Duration) Option { return func(o *Options) { o.WriteTimeout = d } }

// WithIdleMemoryRelease makes the plugin return the process's free memory
// to the OS once its load has been gone for after: once no batch frame
// has arrived for after (within a quarter of it) and no call or cast
// runs, it calls debug.FreeOSMemory, once; the next frame starts the watch
// anew. Without it (the default) what a burst leaves behind stays with the
// process until the runtime's next collection (docs/operations.md).
//
// The cost is one full collection and the scavenging of the free heap per
// burst, and the next burst faults its memory in again. Use it for a
// server that serves in bursts and shares its machine, with after well
// above the gaps within a burst (seconds); not for a server busy all the
// time. GOMEMLIMIT (debug.SetMemoryLimit) is the runtime's own bound, and
// works without this option. A negative after is an ErrInvalidOption.
func WithIdleMemoryRelease(after time.Duration) Option {
	return func(o *Options) { o.IdleMemoryRelease = after }
}

// WithMetrics sends the server metrics to r.
func WithMetrics(r metrics.Registry) Option { return func(o *Options) { o.Registry = r } }

func buildOptions(opts []Option) (Options, error) {
	o := Options{BatchCap: DefaultBatchCap, MaxFrameBytes: DefaultMaxFrameBytes, WriteTimeout: DefaultWriteTimeout, Window: DefaultWindow, WindowBytes: DefaultWindowBytes}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.PoolSize == 0:
		o.PoolSize = runtime.GOMAXPROCS(0)
	case o.PoolSize < 0 && o.PoolSize != Disabled:
		return o, fmt.Errorf("%w: pool size %d (use a positive number, 0 for GOMAXPROCS, or Disabled)", ErrInvalidOption, o.PoolSize)
	}
	if o.IdleMemoryRelease < 0 {
		return o, fmt.Errorf("%w: idle memory release after %v (use a positive duration, or 0 for never)", ErrInvalidOption, o.IdleMemoryRelease)
	}
	if o.BatchCap <= 0 || o.MaxFrameBytes <= 0 || o.WriteTimeout <= 0 || o.Window <= 0 || o.WindowBytes <= 0 {
		return o, fmt.Errorf("%w: batch cap, byte cap, window, byte window and write timeout must be positive", ErrInvalidOption)
	}
	if o.Registry == nil {
		o.Registry = metrics.NewRegistry()
	}
	return o, nil
}
