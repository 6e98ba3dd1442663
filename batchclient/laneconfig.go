package batchclient

import (
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// laneConfig is everything a lane reads from its client, handed over as
// a value when the lane is made: the client's options it applies, the
// instruments it reports to, and the client's hooks for what the lane
// hears and cannot handle alone (pushes, drains). A lane holds no pointer
// back to the Client.
type laneConfig struct {
	// BatchCap is the client's cap on entries per frame (Options.BatchCap);
	// the lane keeps within the lower of it and the server's.
	BatchCap int
	// MaxFrameBytes is the client's frame cap (Options.MaxFrameBytes); the
	// lane writes within the lower of it and the server's, and reads
	// frames up to it.
	MaxFrameBytes int
	// QueueEntries and QueueBytes bound the lane's queue
	// (Options.QueueEntries, Options.QueueBytes).
	QueueEntries int
	QueueBytes   int
	// Overflow is what a caller meets at a full queue (Options.Overflow).
	Overflow Overflow
	// HeartbeatInterval and HeartbeatTimeout judge the peer alive
	// (Options.HeartbeatInterval, Options.HeartbeatTimeout).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// SerializeType encodes arguments and decodes replies
	// (Options.SerializeType).
	SerializeType protocol.SerializeType
	// CompressType compresses the lane's frames (Options.CompressType).
	CompressType protocol.CompressType

	// Metrics are the client's instruments the lane reports to.
	Metrics laneMetrics
	// Auth returns the token every frame carries (Client.SetAuth); it is
	// read once per frame.
	Auth func() string
	// Woken counts the callers of Call handed their result and not yet
	// run (see Client.woken); it is the Client's, shared by every lane.
	Woken *atomic.Int64
	// OnPush hands over a message the server pushed on the lane (rpcx's
	// Server.SendMessage); stop closes when the lane dies, and ends a
	// delivery that waits for room.
	OnPush func(msg *codec.Message, stop <-chan struct{})
	// OnDrain is told the lane's address when its server begins to shut
	// down, before any of the lane's entries fails for it.
	OnDrain func(addr string)
}

// laneMetrics are the client's go-metrics instruments a lane updates.
type laneMetrics struct {
	frames, errOverload, errConn, errStale metrics.Counter
	errService, errCodec, errDrain         metrics.Counter
	batchSize                              metrics.Histogram
	queueDepth                             metrics.Gauge
}

// laneConfig is the configuration of the lanes to addr (the address as
// the client's table knows it).
func (c *Client) laneConfig(addr string) laneConfig {
	o, m := &c.opts, c.metrics
	return laneConfig{
		BatchCap:          o.BatchCap,
		MaxFrameBytes:     o.MaxFrameBytes,
		QueueEntries:      o.QueueEntries,
		QueueBytes:        o.QueueBytes,
		Overflow:          o.Overflow,
		HeartbeatInterval: o.HeartbeatInterval,
		HeartbeatTimeout:  o.HeartbeatTimeout,
		SerializeType:     o.SerializeType,
		CompressType:      o.CompressType,
		Metrics: laneMetrics{
			frames: m.frames, errOverload: m.errOverload, errConn: m.errConn, errStale: m.errStale,
			errService: m.errService, errCodec: m.errCodec, errDrain: m.errDrain,
			batchSize: m.batchSize, queueDepth: m.queueDepth,
		},
		Auth:  c.authToken,
		Woken: &c.woken,
		OnPush: func(msg *codec.Message, stop <-chan struct{}) {
			c.pushed(addr, msg, stop)
		},
		OnDrain: c.drains.mark,
	}
}
