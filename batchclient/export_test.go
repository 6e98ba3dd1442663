package batchclient

import (
	"net"

	"github.com/smallnest/rpcx/client"
)

// UnreadBytes exposes unreadBytes to the external tests.
var UnreadBytes = unreadBytes

// PlainClientBroken reports whether the plain rpcx client the peer of addr
// holds has noticed that its connection is gone. rpcx's Client races with
// itself when a call is made on a connection that is closing and not yet
// noticed (its send and its reader both set the call's Error), so tests
// that restart a plain server wait for this first.
func PlainClientBroken(c *Client, addr string) bool {
	p, err := c.peer(addr)
	if err != nil || p == nil {
		return false
	}
	pc := p.currentPlain()
	return pc == nil || pc.IsShutdown() || pc.IsClosing()
}

// WokenCallers is the count of callers of Call handed a result and not yet
// run (see Client.woken); at rest it is zero.
func WokenCallers(c *Client) int64 { return c.woken.Load() }

// LaneConn returns the connection of one of addr's lanes, or nil.
func LaneConn(c *Client, addr string) net.Conn { return c.laneConn(addr) }

// RoomWaiters is the count of callers waiting for queue room on the lanes
// of addr's current pool, and QueuedEntries the entries queued on them.
func RoomWaiters(c *Client, addr string) (waiters, queued int) {
	p, err := c.peer(addr)
	if err != nil || p == nil {
		return 0, 0
	}
	for _, l := range p.view.Load().lanes {
		l.qmu.Lock()
		waiters += l.waiting
		queued += len(l.queue)
		l.qmu.Unlock()
	}
	return waiters, queued
}

// GenerateRPCClient makes a new RPCClient for the server at addr with the
// builder of xc (an XClient of this package), as rpcx's XClient does each
// time it has no cached client for the server.
func GenerateRPCClient(xc client.XClient, addr string) (client.RPCClient, error) {
	return xc.(*xClient).b.GenerateClient("tcp@"+addr, "", "")
}

// BytesInFlight is the bytes of frames the lanes of addr's current pool
// have written and the server has not handed back (the byte window).
func BytesInFlight(c *Client, addr string) int64 {
	p, err := c.peer(addr)
	if err != nil || p == nil {
		return 0
	}
	var n int64
	for _, l := range p.view.Load().lanes {
		n += l.bytesInFlight()
	}
	return n
}

// ByteWindowFit is how many entries of the given encoded sizes a lane's
// writer sends now as one frame, with a byte window of limit (0: none)
// and inflight bytes unanswered, under a frame cap of frameBytes.
func ByteWindowFit(limit, inflight int64, frameBytes int, sizes ...int) int {
	w := byteWindow{limit: limit}
	w.inflight.Store(inflight)
	out := make([]*entry, len(sizes))
	for i, s := range sizes {
		out[i] = &entry{size: s}
	}
	return w.fit(out, frameBytes)
}

// ByteWindowWriterWaits reports whether a lane's writer, holding one Call
// entry whose arguments it has not encoded yet (the byte window was full
// when it looked), waits for a credit, with a byte window of limit and
// inflight bytes unanswered now.
func ByteWindowWriterWaits(limit, inflight int64) bool {
	l := &lane{frameBytes: 1 << 20, bw: byteWindow{limit: limit}}
	l.bw.inflight.Store(inflight)
	e := &entry{deferred: true, size: 100}
	n, again := l.fitWindow([]*entry{e})
	return n == 0 && !again && l.bw.stalled.Load()
}

// MaxBatchHeader is the most bytes a batch frame's header takes.
const MaxBatchHeader = maxBatchHeader
