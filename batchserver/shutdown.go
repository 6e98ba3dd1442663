package batchserver

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
	"github.com/rpcxbatch/rpcxbatch/internal/sockout"
)

// Graceful shutdown. rpcx v1.9.4's Server.Shutdown calls every plugin's
// Unregister hook, stops reading every connection, waits while its count
// of requests being handled (handlerMsgNum) is above zero, and closes the
// connections. A batch frame is one such request, but its handler returns
// once its entries are handed out: rpcx alone would close the connections
// under entries still running, and lose their replies.
//
// So the plugin counts itself in handlerMsgNum while any connection has
// entries unfinished or replies unwritten, from the moment a Shutdown could
// need it: the Unregister hook during Shutdown, or every frame once a
// service was unregistered beforehand (s.UnregisterAll() ahead of
// Shutdown, as registry users do). Each connection gets a drain notice, so
// its lane stops writing and fails its unsent entries with an error
// Failover retries elsewhere. A running server pays one atomic load a frame.

const (
	// drainPoll is how often a drain looks whether the connections are
	// idle. Shutdown itself looks once a second (rpcx's poll interval).
	drainPoll = 2 * time.Millisecond
	// drainQuiet is how long every connection must have been idle before
	// a drain lets Shutdown go on. rpcx counts a request from when the
	// goroutine it starts for it runs, not from when it was read: a frame
	// read just before Shutdown whose goroutine has not run yet is not
	// counted anywhere. The quiet time gives such a goroutine, on a busy
	// machine, time to run (it then holds Shutdown, see holdWhileDraining).
	// Shutdown looks at the count once a second anyway.
	drainQuiet = 500 * time.Millisecond
	// drainNoticeEvery is how often a draining connection is reminded: the
	// server no longer answers heartbeats, and a lane that hears nothing
	// for its heartbeat timeout (2 s by default) gives up on the server.
	drainNoticeEvery = 250 * time.Millisecond
	// noticeWait bounds how long a Shutdown with nothing in flight waits
	// for the drain notices to be written (a write takes microseconds; a
	// client that does not read is cut off by rpcx anyway).
	noticeWait = 100 * time.Millisecond
	// inflightWait bounds how long the Unregister hook of a Shutdown waits
	// for the entries in flight at that moment, before it counts the
	// plugin in rpcx's count (which rpcx looks at once a second).
	inflightWait = 100 * time.Millisecond
)

// rpcxShutdown points at the fields of an rpcx server that graceful
// shutdown reads and counts in. rpcx keeps them unexported; like the
// service table, the layout is that of rpcx v1.9.4 (internal/rpcxlayout
// reads it), and New fails with ErrUnsupportedRPCX rather than guess.
type rpcxShutdown struct {
	inShutdown    *int32
	handlerMsgNum *int32
	// mu is held by Shutdown from before the Unregister hooks until every
	// connection has stopped reading.
	mu *sync.RWMutex
	// unregisteredAll is the done flag of the server's unregisterAllOnce:
	// once UnregisterAll has run, Shutdown runs no Unregister hook. nil
	// when this Go's sync.Once is laid out otherwise: then every
	// Unregister outside Shutdown is taken for UnregisterAll.
	unregisteredAll *atomic.Bool
}

func readRPCXShutdown(s *server.Server) (rpcxShutdown, error) {
	l, ok := rpcxlayout.ReadShutdown(s)
	if !ok {
		return rpcxShutdown{}, fmt.Errorf("%w (shutdown state unreadable)", ErrUnsupportedRPCX)
	}
	return rpcxShutdown{
		inShutdown:      l.InShutdown,
		handlerMsgNum:   l.HandlerMsgNum,
		mu:              l.Mu,
		unregisteredAll: l.UnregisteredAll,
	}, nil
}

// hooksSpent reports whether UnregisterAll has run, so that Shutdown will
// run no Unregister hook (rpcx runs them once).
func (r rpcxShutdown) hooksSpent() bool {
	return r.unregisteredAll == nil || r.unregisteredAll.Load()
}

// shuttingDown reports whether the server's Shutdown has begun.
func (r rpcxShutdown) shuttingDown() bool { return atomic.LoadInt32(r.inShutdown) == 1 }

// Draining reports whether the server's Shutdown has begun and the plugin
// is finishing the entries it had read.
func (p *Plugin) Draining() bool { return p.draining.Load() }

// beginDrain starts the drain once: the count, and the notices. From the
// Unregister hook it runs on Shutdown's own goroutine, before Shutdown
// first looks at the count.
func (p *Plugin) beginDrain() {
	if !p.draining.CompareAndSwap(false, true) {
		return
	}
	// Looked at before the notices, which keep the writers busy a moment.
	settled, flushed := p.allIdle()
	for _, c := range p.allConns(nil) {
		c.noticeDrain()
	}
	if !settled || !flushed {
		// A call in flight now mostly ends within milliseconds: waited for
		// here, it does not hold Shutdown for the second rpcx waits
		// between two looks at its count (a lane keeps a call in flight
		// for longer than rpcx keeps a plain request: its frame, the
		// entry, the reply's write).
		settled, flushed = p.awaitIdle(time.Now().Add(inflightWait))
	}
	if settled && flushed {
		// Nothing in flight: Shutdown goes on at once, as plain rpcx's
		// does with no request running (it looks at its count once before
		// it waits a second), once the notices are written: rpcx closes
		// the connections right after, and a lane that was told drains
		// (its calls fail with an error the XClient retries, and it
		// redials at once) where one that only sees its connection end
		// fails the calls it wrote meanwhile. A frame rpcx reads from here
		// on, once the hooks have run, does not run (frameRead). What the
		// end of a drain does for the parked goroutines is done now.
		p.awaitNotices(time.Now().Add(noticeWait))
		p.workers.release(true)
		return
	}
	p.keepCounted(true)
}

// awaitIdle waits until every connection has settled and flushed, or
// until deadline, and reports the last look.
func (p *Plugin) awaitIdle(deadline time.Time) (settled, flushed bool) {
	for {
		if settled, flushed = p.allIdle(); (settled && flushed) || !time.Now().Before(deadline) {
			return settled, flushed
		}
		time.Sleep(drainPoll / 4)
	}
}

// awaitNotices waits until every connection's writer has written what it
// was asked to (the drain notices), or until deadline. It does not wait
// for the peers to acknowledge them: nothing else is left to write (the
// drain found every connection flushed), a notice lost to the close's
// reset costs the lane nothing a lost connection does not, and a peer
// with nothing to send may delay its acknowledgement by tens of
// milliseconds, during which more frames would arrive and hold Shutdown.
func (p *Plugin) awaitNotices(deadline time.Time) {
	for time.Now().Before(deadline) && !p.allWritten() {
		time.Sleep(drainPoll / 4)
	}
}

// allWritten reports whether every connection's writer is done.
func (p *Plugin) allWritten() bool {
	for _, c := range p.allConns(nil) {
		if _, flushed := c.idleInProcess(); !flushed {
			return false
		}
	}
	return true
}

// keepCounted counts the plugin in rpcx's handlerMsgNum, unless it is
// already, and starts the goroutine that takes it out once every
// connection is idle. With force the count is taken even when all is idle:
// a drain holds Shutdown until its connections have stopped reading.
func (p *Plugin) keepCounted(force bool) {
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	if p.holding || !force && p.idle() {
		return
	}
	atomic.AddInt32(p.rs.handlerMsgNum, 1)
	p.heldLocked()
}

// heldLocked notes that the caller, holding holdMu, counted the plugin in
// rpcx's handlerMsgNum, and starts the goroutine that takes it out.
func (p *Plugin) heldLocked() {
	p.holding = true
	p.tasks.spawn(p.watchIdle)
}

// watchIdle takes the plugin out of rpcx's count once every connection is
// idle (or gone: rpcx closes them when Shutdown's context ends). While the
// server shuts down it first waits until rpcx reads no more, and reminds
// the connections that it drains.
func (p *Plugin) watchIdle() {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	stoppedReading := false
	noticed := time.Now()
	var idleSince time.Time
	for {
		if p.rs.shuttingDown() && p.draining.CompareAndSwap(false, true) {
			// Shutdown began without running the Unregister hook.
			for _, c := range p.allConns(nil) {
				c.noticeDrain()
			}
		}
		if p.draining.Load() {
			if !stoppedReading {
				// Shutdown holds mu until every connection has stopped
				// reading (but for the frame a read loop is in the middle
				// of, see frameRead): the frames already read are counted
				// by rpcx once their goroutines run (and then hold
				// Shutdown, see holdWhileDraining).
				p.rs.mu.RLock()
				p.rs.mu.RUnlock()
				stoppedReading = true
			}
			if time.Since(noticed) >= drainNoticeEvery {
				noticed = time.Now()
				for _, c := range p.allConns(nil) {
					c.noticeDrain()
				}
			}
		}
		p.holdMu.Lock()
		settled, flushed := p.allIdle()
		switch {
		case !settled:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		}
		if settled && flushed && (!p.draining.Load() || time.Since(idleSince) >= drainQuiet) {
			p.holding = false
			atomic.AddInt32(p.rs.handlerMsgNum, -1)
			p.holdMu.Unlock()
			if p.draining.Load() {
				// What Close does but wait for the plugin's goroutines,
				// this one among them: rpcx v1.9.4 never calls its
				// RegisterOnShutdown hooks.
				p.workers.release(true)
			}
			return
		}
		p.holdMu.Unlock()
		<-tick.C
	}
}

// allIdle reports whether every connection has settled (no frame
// undelivered, no entry unfinished, no reply waiting for the writer) and
// whether every one has flushed (its writer is done, and its peer has
// taken what was written). Only entries unsettle a connection: the
// drain's own notices keep a writer busy for a moment, and must not keep
// the drain from ending. The sockets are looked at only once every writer
// is done: a drain looks every few milliseconds.
func (p *Plugin) allIdle() (settled, flushed bool) {
	conns := p.allConns(nil)
	settled, flushed = true, true
	for _, c := range conns {
		s, f := c.idleInProcess()
		settled, flushed = settled && s, flushed && f
	}
	for i := 0; flushed && i < len(conns); i++ {
		flushed = conns[i].delivered()
	}
	return settled, flushed
}

// idle reports whether every connection has settled and flushed. It
// looks at the sockets only once every writer is done: a frame's handler
// calls it while services are unregistered (holdWhileDraining).
func (p *Plugin) idle() bool {
	conns := p.allConns(nil)
	for _, c := range conns {
		if s, f := c.idleInProcess(); !s || !f {
			return false
		}
	}
	for _, c := range conns {
		if !c.delivered() {
			return false
		}
	}
	return true
}

// frameRead runs in rpcx's read loop for each frame it reads on a lane,
// and reports whether the frame's entries may run.
//
// rpcx counts a request as being handled only once the goroutine it
// starts for it runs. Its Shutdown looks at that count once its hooks have
// run (and once a second after), and as soon as it finds none closes the
// connections, without looking again. So a frame read once Shutdown has
// begun, or once UnregisterAll has run (a Shutdown will then come without
// its hooks, see holdWhileDraining), counts the plugin in there and then.
// Where that may be too late (Shutdown's hooks have run, and the plugin
// was not counted already), the frame does not run: Shutdown may be
// closing its connection, and its calls would run with their replies
// lost, to be run again elsewhere by a Failover caller. They are told
// that they did not run (codec.MethodUnrun). rpcx reads no more after it
// on that connection.
func (p *Plugin) frameRead() bool {
	if !p.rs.shuttingDown() && !(p.armed.Load() && p.rs.hooksSpent()) {
		return true
	}
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	if p.holding {
		return true
	}
	// Counted first, then looked: a Shutdown whose hooks had not all run
	// by the look finds the count when it looks at it.
	atomic.AddInt32(p.rs.handlerMsgNum, 1)
	if p.rs.shuttingDown() && p.rs.hooksSpent() {
		atomic.AddInt32(p.rs.handlerMsgNum, -1)
		return false
	}
	p.heldLocked()
	return true
}

// holdWhileDraining keeps a frame's handler, and with it rpcx's count of
// requests being handled, until c has finished its entries and written
// their replies, or is gone. Only frames that arrive during Shutdown wait:
// rpcx read them before it stopped reading.
func (p *Plugin) holdWhileDraining(c *conn) {
	if p.armed.Load() && p.rs.hooksSpent() {
		// UnregisterAll ran: Shutdown will come without the Unregister
		// hook. Count in before the handler returns. A service
		// unregistered alone leaves Shutdown its hooks, and frames this
		// cost.
		p.keepCounted(false)
	}
	if !p.rs.shuttingDown() {
		return
	}
	// The Unregister hook starts the drain; this covers a server whose
	// hooks did not run (no services, or UnregisterAll called earlier).
	p.beginDrain()
	if p.opts.Pool != nil {
		// On a user pool this handler holds a worker that its
		// connection's entries may be queued for (pool.go).
		p.holdOffPool(c)
		return
	}
	p.waitIdle(c)
}

// waitIdle returns once c has finished its entries and written their
// replies, or is gone.
func (p *Plugin) waitIdle(c *conn) {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for p.tracked(c) {
		if settled, flushed := c.idle(); settled && flushed {
			return
		}
		<-tick.C
	}
}

// tracked reports whether c is still a live connection of the plugin.
func (p *Plugin) tracked(c *conn) bool {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	return p.conns[c.c] == c
}

// idle reports whether every frame rpcx read on c has been delivered,
// and every entry delivered has finished and queued its reply (settled),
// and whether the writer has written them all and the peer has taken them
// (flushed, see delivered). A broken connection writes nothing more: it
// is both.
func (c *conn) idle() (settled, flushed bool) {
	if settled, flushed = c.idleInProcess(); flushed {
		flushed = c.delivered()
	}
	return settled, flushed
}

// idleInProcess is idle as far as the process can tell, without the look
// at the socket: flushed once the writer has written everything.
func (c *conn) idleInProcess() (settled, flushed bool) {
	c.replyMu.Lock()
	defer c.replyMu.Unlock()
	if c.broken {
		return true, true
	}
	// A frame's handler counts its entries in flight before it counts the
	// frame out of the unstarted ones: looked at in the other order, a
	// frame between the two would be in neither count. queueReply gives an
	// entry's place back under replyMu, in the same step that queues its
	// reply and starts the writer.
	settled = c.mark.unstarted.Load() == 0
	settled = settled && c.inflight.Load() == 0 && len(c.replies) == 0
	return settled, !c.writing && !c.drainNotice.Load()
}

// delivered reports whether the peer has taken (acknowledged) everything
// the writer wrote, as far as the socket tells (internal/sockout), or has
// left output untaken for longer than the write timeout, as counted from
// the first look that found it (a peer that does not read is not waited
// for longer than a write would wait for it).
//
// rpcx closes the connection once the drain ends, and Linux answers the
// close of a socket with unread input (frames the lane wrote before it
// heard the drain notice) with a reset that drops what the socket still
// held: replies written, whose calls had run, lost on a peer that reads
// slowly.
func (c *conn) delivered() bool {
	n, ok := sockout.Unacked(c.c)
	if !ok || n == 0 {
		c.untakenSince.Store(0)
		return true
	}
	now := int64(time.Since(c.p.made))
	if c.untakenSince.CompareAndSwap(0, now) {
		return false
	}
	return time.Duration(now-c.untakenSince.Load()) > c.p.opts.WriteTimeout
}

// noticeDrain has the connection's writer send a drain notice.
func (c *conn) noticeDrain() {
	c.drainNotice.Store(true)
	c.replyMu.Lock()
	start := !c.broken && c.claimWriterLocked()
	c.replyMu.Unlock()
	if start {
		c.startWriter()
	}
}
