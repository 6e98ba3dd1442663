package batchclient

import (
	"time"

	"github.com/smallnest/rpcx/protocol"
)

// laneConfig is the part of the client's Options a lane reads, copied
// when the lane is made, so the lane reads its settings from a value of
// its own rather than through the Client.
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
}

// newLaneConfig copies a lane's settings from the client's options.
func newLaneConfig(o *Options) laneConfig {
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
	}
}
