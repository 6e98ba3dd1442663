package lane

import (
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Config is everything a lane reads from its client, handed over as a
// value when the lane is made: the client's options it applies, the
// instruments it reports to, and the client's hooks for what the lane
// hears and cannot handle alone (pushes, drains). A lane holds no pointer
// back to its client.
type Config struct {
	// BatchCap is the client's cap on entries per frame; the lane keeps
	// within the lower of it and the server's.
	BatchCap int
	// MaxFrameBytes is the client's frame cap; the lane writes within the
	// lower of it and the server's, and reads frames up to it.
	MaxFrameBytes int
	// QueueEntries and QueueBytes bound the lane's queue (queue.go).
	QueueEntries int
	QueueBytes   int
	// FailFast makes a caller that meets a full queue fail with
	// ErrOverloaded at once; otherwise it waits for room until its context
	// ends.
	FailFast bool
	// HeartbeatInterval and HeartbeatTimeout judge the peer alive
	// (liveness.go, heartbeat.go).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// IdleTimeout, when above 0, makes the lane note when it last wrote a
	// frame or read a message (LastTraffic), for its peer to close a pool
	// idle that long, as rpcx's client drops a connection
	// (Option.IdleTimeout); IdleHeartbeats counts the answers to the
	// lane's heartbeats as traffic too (rpcx's own heartbeat renews its
	// deadline).
	IdleTimeout    time.Duration
	IdleHeartbeats bool
	// SerializeType encodes arguments and decodes replies.
	SerializeType protocol.SerializeType
	// CompressType compresses the lane's frames.
	CompressType protocol.CompressType

	// Metrics are the client's instruments the lane reports to.
	Metrics Metrics
	// Auth returns the token every frame carries; it is read once per
	// frame, so a new token applies from the next frame on.
	Auth func() string
	// Woken counts the callers of Call handed their result and not yet
	// run; it is the client's, shared by all its lanes. The lane adds one
	// for each such caller it completes (the caller takes it off when it
	// runs), and its writer lets them run first (settle.Settle).
	Woken *atomic.Int64
	// OnPush hands over a message the server pushed on the lane (rpcx's
	// Server.SendMessage); its fields alias the reader's buffer, valid
	// during the call only. stop closes when the lane dies, and ends a
	// delivery that waits for room. The message goes by value: a pointer
	// to the reader's message, passed to a function value, would make
	// the compiler allocate every message the reader reads.
	OnPush func(msg codec.Message, stop <-chan struct{})
	// OnDrain is told the lane's address when its server begins to shut
	// down, before any of the lane's entries fails for it.
	OnDrain func(addr string)
	// Down is told, without blocking, when the lane fails or begins to
	// drain.
	Down chan<- struct{}
	// Saturated, when set, is told without blocking when the lane cannot
	// keep up alone (load.go).
	Saturated chan<- struct{}
}

// Metrics are the go-metrics instruments a lane updates.
type Metrics struct {
	// Frames counts the frames written, BatchSize their entries.
	Frames    metrics.Counter
	BatchSize metrics.Histogram
	// QueueDepth is the entries left queued after the writer took some.
	QueueDepth metrics.Gauge
	// ErrOverload counts the entries refused by a full queue (FailFast).
	ErrOverload metrics.Counter
	// ErrConn counts the entries failed by the loss of the connection.
	ErrConn metrics.Counter
	// ErrStale counts the reply frames of another incarnation dropped.
	ErrStale metrics.Counter
	// ErrService counts the calls failed by the server or by decoding
	// their replies.
	ErrService metrics.Counter
	// ErrCodec counts the calls whose arguments failed to encode.
	ErrCodec metrics.Counter
	// ErrDrain counts the entries failed because the server drains.
	ErrDrain metrics.Counter
}
