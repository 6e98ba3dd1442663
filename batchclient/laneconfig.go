package batchclient

import (
	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/dial"
	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// laneConfig is the configuration of a lane to addr (the address as the
// client's table knows it): the client's options, its instruments, and its
// hooks, as values, so that a lane holds no pointer back to the Client.
// Down, the channel told when the lane fails or drains, is the peer's to
// set.
func (c *Client) laneConfig(addr string) lane.Config {
	o, m := &c.opts, c.metrics
	return lane.Config{
		BatchCap:          o.BatchCap,
		MaxFrameBytes:     o.MaxFrameBytes,
		QueueEntries:      o.QueueEntries,
		QueueBytes:        o.QueueBytes,
		FailFast:          o.Overflow == OverflowFailFast,
		HeartbeatInterval: o.HeartbeatInterval,
		HeartbeatTimeout:  o.HeartbeatTimeout,
		SerializeType:     o.SerializeType,
		// rpcx drops a connection nothing was read from (nor written to)
		// for IdleTimeout; its own heartbeat counts as traffic.
		IdleTimeout:    o.RPCX.IdleTimeout,
		IdleHeartbeats: o.RPCX.Heartbeat && o.RPCX.HeartbeatInterval > 0,
		CompressType:   o.CompressType,
		Metrics: lane.Metrics{
			Frames: m.frames, BatchSize: m.batchSize, QueueDepth: m.queueDepth,
			ErrOverload: m.errOverload, ErrConn: m.errConn, ErrStale: m.errStale,
			ErrService: m.errService, ErrCodec: m.errCodec, ErrDrain: m.errDrain,
		},
		Auth:  c.authToken,
		Woken: &c.woken,
		OnPush: func(msg codec.Message, stop <-chan struct{}) {
			c.pushed(addr, &msg, stop)
		},
		OnDrain: c.drains.mark,
	}
}

// dialer opens the lane connections to addr on network, with the
// client's options as values.
func (c *Client) dialer(network, addr string) dial.Dialer {
	o := &c.opts
	return dial.Dialer{
		Network: network, Addr: addr,
		DialTimeout:      o.DialTimeout,
		KeepAlive:        o.TCPKeepAlivePeriod,
		TLSConfig:        o.TLSConfig,
		HeartbeatTimeout: o.HeartbeatTimeout,
		HandshakeTimeout: o.HandshakeTimeout,
		MaxFrameBytes:    o.MaxFrameBytes,
		CompressType:     o.CompressType,
		Auth:             c.authToken,
	}
}
