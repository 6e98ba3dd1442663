package batchclient

import (
	"context"
	"net"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

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
		w, q := l.Waiters()
		waiters += w
		queued += q
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
		n += l.BytesInFlight()
	}
	return n
}

// PendingCalls is the count of calls waiting for their replies on the
// lanes of addr's current pool.
func PendingCalls(c *Client, addr string) int {
	p, err := c.peer(addr)
	if err != nil || p == nil {
		return 0
	}
	n := 0
	for _, l := range p.view.Load().lanes {
		n += l.PendingCalls()
	}
	return n
}

// CallerFrames is the count of frames callers of Call wrote themselves on
// quiet lanes of addr's current pool (flat combining), not their writers.
func CallerFrames(c *Client, addr string) int64 {
	p, err := c.peer(addr)
	if err != nil || p == nil {
		return 0
	}
	var n int64
	for _, l := range p.view.Load().lanes {
		n += l.CallerFrames()
	}
	return n
}

// WriterFrames is the count of frames the writer goroutines of addr's
// current pool began (counted before each is written).
func WriterFrames(c *Client, addr string) int64 {
	p, err := c.peer(addr)
	if err != nil || p == nil {
		return 0
	}
	var n int64
	for _, l := range p.view.Load().lanes {
		n += l.WriterFrames()
	}
	return n
}

// SetCombining turns the lanes' flat combining on or off (on by default)
// for clients made afterwards, until the test ends.
func SetCombining(t interface{ Cleanup(func()) }, on bool) {
	was := lane.SetCombining(on)
	t.Cleanup(func() { lane.SetCombining(was) })
}

// WatchContext gives ctx a shared-context watch now (ctxwatch.go), as
// the client does for a context it has seen shared, and reports whether a
// slot was free.
func WatchContext(c *Client, ctx context.Context) bool { return c.watch(ctx, ctx.Done()) }

// SharedWatches is the number of shared-context watches c holds.
func SharedWatches(c *Client) int { return c.watchCount() }

// FiredWatch leaves in c a watch of ctx (which must have ended) that has
// fired and walked its lanes, as a call that took the watch just before it
// fired finds it (the window Call's fired check closes).
func FiredWatch(c *Client, ctx context.Context) {
	w := &ctxWatch{c: c, ctx: ctx, done: ctx.Done()}
	c.watches[0].Store(w)
	w.fire()
	c.watches[0].Store(w)
}

// WatchedLanes is the number of lanes the client's shared-context watches
// hold.
func WatchedLanes(c *Client) int {
	n := 0
	for i := range c.watches {
		if w := c.watches[i].Load(); w != nil {
			if ls := w.lanes.Load(); ls != nil {
				n += len(*ls)
			}
		}
	}
	return n
}

// NativeCalls reports whether xc, a drop-in XClient, would run its next
// call on its own path (xclient_native.go) rather than rpcx's XClient.
func NativeCalls(xc client.XClient) bool { return xc.(*xClient).nativeNow() }
