package batchclient

import (
	"hash/maphash"
	"net"
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/dial"
	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// peerEnv is what a peer needs from its Client, as values, so that a peer
// holds no pointer back to the Client: the options it reads, its
// instruments, the lane and dial configuration, the counters it shares
// with the other peers, and the Client's hooks (function values, called
// only on rare events: a state change, a lost pool, a forget, a plain
// dial). Client.peerEnv builds it once per peer; the peer never changes
// it.
type peerEnv struct {
	// keySeed hashes WithKey keys to lanes; rr spreads keyless entries
	// over the lanes (the Client's, shared by every peer). pick reads
	// them on every call: they come first.
	keySeed maphash.Seed
	rr      *atomic.Uint64

	// forgetDown, reconnectMin, reconnectMax, reprobePlain and lanes are
	// the options of the same names.
	forgetDown                 time.Duration
	reconnectMin, reconnectMax time.Duration
	reprobePlain               time.Duration
	lanes                      int
	// minLanes, maxLanes and laneIdle are the options MinLanes, MaxLanes
	// and LaneIdle (lanepool.go).
	minLanes, maxLanes int
	laneIdle           time.Duration
	// lanesOpened adds n (negative: closed) to the Client's count of open
	// lanes and its gauge; lanesClosed lets the Client drop what it keeps
	// of lanes that closed (a retired lane's).
	lanesOpened func(n int)
	lanesClosed func()
	// pushWanted reports whether the client listens for the server's
	// pushes (a server-message channel is registered for the address).
	pushWanted func() bool
	// rpcx is the option the plain rpcx client connects with.
	rpcx client.Option

	metrics peerMetrics

	// lane is the configuration of every lane of the pool, Down aside (the
	// peer's own, set by newPeer); dial opens the lane connections.
	lane lane.Config
	dial dial.Dialer

	// forget takes the peer out of the Client's table, if it is still the
	// address's peer.
	forget func(*peer)
	// pushLost tells the server-message channel of addr, if any, that the
	// pool to server is gone, and lets the Client drop what it keeps of
	// the pool's lanes (Client.poolLost).
	pushLost func(addr string, server net.Addr, cause error)
	// stopCause is the error the calls in flight fail with when the peer
	// is shut down (Stop or Close).
	stopCause func() error
	// drainMark and drainClear add addr to and remove it from the
	// Client's set of draining addresses (drain.go).
	drainMark, drainClear func(addr string)
	// newPlainClient makes the (unconnected) plain rpcx client of addr,
	// with its server-message channel.
	newPlainClient func(addr string) *client.Client
	// plainAdopted records that the plain client of addr took over conn,
	// a connection made for lanes (adoptPlain).
	plainAdopted func(addr string, conn net.Conn)
}

// peerMetrics are the Client's instruments a peer counts.
type peerMetrics struct {
	fallbacks, reconnects, errDown metrics.Counter
	lanesAdded, lanesRetired       metrics.Counter
}

// peerEnv builds the environment of the peer for key (the address as the
// client's table knows it), on network and host.
func (c *Client) peerEnv(key, network, host string) peerEnv {
	o := &c.opts
	return peerEnv{
		keySeed:      c.keySeed,
		rr:           &c.rr,
		forgetDown:   o.ForgetDown,
		reconnectMin: o.ReconnectMin, reconnectMax: o.ReconnectMax,
		reprobePlain: o.ReprobePlain,
		lanes:        o.Lanes,
		minLanes:     o.MinLanes, maxLanes: o.MaxLanes, laneIdle: o.LaneIdle,
		lanesOpened: func(n int) {
			c.metrics.lanesOpen.Update(c.lanesOpen.Add(int64(n)))
		},
		lanesClosed: c.dropDeadLanes,
		pushWanted:  func() bool { return c.push.has(key) },
		rpcx:        o.RPCX,
		metrics: peerMetrics{
			fallbacks: c.metrics.fallbacks, reconnects: c.metrics.reconnects, errDown: c.metrics.errDown,
			lanesAdded: c.metrics.lanesAdded, lanesRetired: c.metrics.lanesRetired,
		},
		lane:           c.laneConfig(key),
		dial:           c.hookedDialer(network, host),
		forget:         c.forget,
		pushLost:       c.poolLost,
		stopCause:      c.stopCause,
		drainMark:      c.drains.mark,
		drainClear:     c.drains.clear,
		newPlainClient: c.newPlainClient,
		plainAdopted:   c.conns.plainAdopted,
	}
}

// hookedDialer is the dialer of the lanes to host, with the XClients'
// ConnCreated plugins (connhooks.go).
func (c *Client) hookedDialer(network, host string) dial.Dialer {
	d := c.dialer(network, host)
	d.Created = c.conns.created
	return d
}
