package batchserver

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// maxHeldFrames bounds the frames one connection may hold, waiting for
// delivery or for a frame before them; a peer that runs that far ahead of
// itself is not an rpcxbatch lane (the client's window keeps a lane's
// unfinished entries, so its frames in flight, to 16,384 by default).
const maxHeldFrames = 4 * 4096

// maxGap is how long later frames may wait for a missing one before the
// connection is given up: the client's lanes then reconnect, and their
// calls fail with ErrConnection instead of hanging.
const maxGap = 2 * time.Second

// heldFrame is a frame waiting for its turn in lane order.
type heldFrame struct {
	entries []codec.Entry
	arrived time.Time
	fr      *frameHold
}

// conn is the batch state of one client connection: it puts frames back in
// lane order, and it collects replies and writes them as reply frames.
type conn struct {
	p    *Plugin
	c    net.Conn
	mark *laneMark // the hooks' mark of c: its frames read, not yet begun

	// Frame order. rpcx hands each frame to its own goroutine; the one that
	// finds the next expected frame delivers it and every held frame after it.
	orderMu    sync.Mutex // guards nextSeq, held, delivering and gapTimer
	nextSeq    uint64
	held       map[uint64]heldFrame
	delivering bool
	gapTimer   *time.Timer // armed while a frame is missing

	// maxReply is the largest reply frame: the smaller of this server's
	// MaxFrameBytes and what the client said it reads.
	maxReply atomic.Int64
	// compress is the protocol.CompressType the lane asked for in its
	// handshake: reply frames are compressed with it (see compress.go).
	compress atomic.Uint32
	// largeReplies is set when the lane reads a reply too large for a
	// frame in a frame of its own (codec.MetaLargeReplies).
	largeReplies atomic.Bool

	// Window. inflight counts the entries delivered and not yet finished;
	// unwritten the calls finished whose replies are not yet written (a
	// call holds its place in the window until then, as it does in the
	// lane's); credits counts finished casts and sends not yet credited
	// back.
	inflight  atomic.Int64
	unwritten atomic.Int64
	credits   atomic.Int64
	// bytes is the byte window's part (bytewindow.go).
	bytes byteWindow

	// Replies. At most one writer goroutine runs per connection: it is
	// started when the first reply or credit is queued and exits when there
	// is none left, so an idle or closed connection holds no goroutine.
	// replyMu guards replies, spare, unrun, writing and broken. writing
	// says a writer runs, or has been claimed (claimWriterLocked): the
	// socket's replies have one owner at a time, and buf and written are
	// its own.
	replyMu sync.Mutex
	nReply  atomic.Int32 // len(replies), readable without replyMu
	replies []codec.Reply
	spare   []codec.Reply
	writing bool
	broken  bool
	buf     []byte
	// unrun holds the ids of calls the writer is to tell the lane did not
	// run (Plugin.unrun).
	unrun []uint64
	// drainNotice asks the writer for a drain notice (see shutdown.go).
	drainNotice atomic.Bool
	// pingWanted asks the writer for a server heartbeat (see busyping.go).
	pingWanted atomic.Bool

	// replyBufs recycles reply payloads; written collects the payloads of
	// the frame being written (used only by the writer).
	replyBufs replyBufs
	written   [][]byte
	// frames counts the frames the writer wrote; the janitor's looks
	// compare it with what they saw last (seenFrames) to find a quiet
	// connection, and quietShed notes one shed since its last frame.
	frames     atomic.Uint32
	seenFrames uint32
	quietShed  bool
	// untakenSince is when a look first found output the peer had not
	// taken, since the plugin was made (0: the last look found none); a
	// drain waits for the peer for at most the write timeout from then
	// (conn.delivered).
	untakenSince atomic.Int64

	// sends runs the connection's send entries in lane order.
	sends sendQueue
}

func newConn(p *Plugin, c net.Conn, m *laneMark) *conn {
	// held is made by the first frame (deliver) and let go while the
	// connection is quiet (shed): an idle lane holds no table.
	st := &conn{p: p, c: c, mark: m, nextSeq: 1}
	st.maxReply.Store(int64(p.opts.MaxFrameBytes))
	return st
}

// capReply replaces a reply that would not fit a frame with an error,
// unless the lane reads it alone in a frame of its own (largeReplies).
func (c *conn) capReply(rp codec.Reply) codec.Reply {
	if n, max := codec.ReplySize(&rp), int(c.maxReply.Load()); n > max && !c.largeReplies.Load() {
		return codec.Reply{ID: rp.ID, Status: codec.StatusError,
			Error: fmt.Sprintf("%v: %d bytes, cap %d", ErrReplyTooLarge, n, max)}
	}
	return rp
}

// fail logs a protocol violation and closes only this connection.
func (c *conn) fail(err error) {
	c.p.metrics.errMalformed.Inc(1)
	logf("rpcxbatch: closing connection from %s: %v", c.c.RemoteAddr(), err)
	c.c.Close()
}

// deliver runs the entries of frame seq, size bytes, once every earlier
// frame has run. arrived is when rpcx read the frame: the entries'
// deadlines count from it.
func (c *conn) deliver(seq uint64, entries []codec.Entry, slab *entrySlab, size int, arrived time.Time) {
	// A lane keeps at most Window entries unfinished, replies not yet
	// written included; twice that is a peer that ignores the window (and
	// perhaps does not read what it asked for), not a slow moment.
	if n := c.inflight.Add(int64(len(entries))) + c.unwritten.Load(); n > 2*int64(c.p.opts.Window) {
		c.fail(fmt.Errorf("%w: %d entries unfinished or unanswered, window %d", ErrWindowExceeded, n, c.p.opts.Window))
		return
	}
	fr, err := c.hold(size, len(entries), arrived, slab)
	if err != nil {
		c.fail(err)
		return
	}
	c.orderMu.Lock()
	_, gap := c.held[c.nextSeq]
	gap = !gap && seq != c.nextSeq
	_, dup := c.held[seq]
	// One bound on held frames, gap or not: rpcx hands each frame to a
	// goroutine of its own, so behind a busy delivery (a slow send
	// handler) the frame due next can come after thousands of later ones
	// on a well-behaved lane; a frame that never comes is the gap timer's.
	if seq < c.nextSeq || dup || len(c.held) >= maxHeldFrames {
		err := fmt.Errorf("%w: frame %d out of sequence (next is %d, %d held)", codec.ErrMalformed, seq, c.nextSeq, len(c.held))
		c.orderMu.Unlock()
		c.fail(err)
		return
	}
	// Deadlines count from when the frame arrived, not from when its turn
	// came behind an earlier frame.
	this := heldFrame{entries: entries, arrived: arrived, fr: fr}
	// The frame due next, with no delivery under way, runs at once without
	// a stop in the table: a lane's frames mostly come in order, and a
	// light lane then never makes a table at all.
	now := seq == c.nextSeq && !c.delivering
	if !now {
		if c.held == nil {
			c.held = make(map[uint64]heldFrame)
		}
		c.held[seq] = this
	}
	switch {
	case now:
		// Delivered below, where a timer armed for it stops.
	case gap && c.gapTimer == nil:
		// A frame before this one is missing. rpcx hands frames to
		// goroutines, so it is normally a moment away; but rpcx may also
		// have dropped it (a rate-limiting plugin), and then this lane
		// would wait forever. A gap that lasts is a broken connection.
		want := c.nextSeq
		c.gapTimer = time.AfterFunc(maxGap, func() { c.gapExpired(want) })
	case seq == c.nextSeq && c.gapTimer != nil:
		// The frame the timer waits for came; it is held behind a
		// delivery still under way (a slow read hook), which delivers it
		// next. The lane is whole: the delivery arms a timer again if it
		// stops at a frame still missing.
		c.gapTimer.Stop()
		c.gapTimer = nil
	}
	if c.delivering {
		c.orderMu.Unlock()
		return
	}
	c.delivering = true
	defer func() {
		// Even if run panics, the lane's later frames must not wait for a
		// delivery that will never come.
		c.delivering = false
		if len(c.held) > 0 && c.gapTimer == nil {
			want := c.nextSeq
			c.gapTimer = time.AfterFunc(maxGap, func() { c.gapExpired(want) })
		}
		c.orderMu.Unlock()
	}()
	for {
		next := this
		if now {
			now = false
		} else {
			var ok bool
			if next, ok = c.held[c.nextSeq]; !ok {
				break
			}
			delete(c.held, c.nextSeq)
		}
		c.nextSeq++
		if c.gapTimer != nil {
			c.gapTimer.Stop()
			c.gapTimer = nil
		}
		c.orderMu.Unlock()
		c.run(next.entries, next.arrived, next.fr)
		c.orderMu.Lock()
	}
}

// gapExpired closes the connection if frame want is still missing: not
// delivered, and not held either. A frame that is held waits for a
// delivery under way (a read hook that blocks, as rpcx's
// ReqRateLimitingPlugin with block set does): that lane is whole, and the
// delivery arms a new timer if it stops at a frame still missing.
func (c *conn) gapExpired(want uint64) {
	c.orderMu.Lock()
	_, arrived := c.held[want]
	current := c.nextSeq == want
	held := len(c.held)
	if current {
		// Only this timer's own gap: a timer that fired as deliver moved
		// past want (too late for Stop) must not drop the reference to
		// the timer armed for the next gap.
		c.gapTimer = nil
	}
	c.orderMu.Unlock()
	if current && !arrived && held > 0 {
		c.fail(fmt.Errorf("%w: frame %d never arrived (dropped before the plugin saw it?); %d later frames waited %v", codec.ErrMalformed, want, held, maxGap))
	}
}

// run starts every entry of one frame, in frame order: calls and casts each
// in a goroutine of their own (as rpcx runs requests), sends on the
// connection's send queue, which runs them one after another in lane order
// without holding up the calls and casts of later frames. Each entry's read
// hooks run here first, in lane order, as rpcx runs them in its read loop.
func (c *conn) run(entries []codec.Entry, arrived time.Time, fr *frameHold) {
	hooks := c.p.hooks.present()
	c.p.metrics.countEntries(entries)
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case codec.KindCall:
			if e.ServicePath == codec.ServicePath && e.ServiceMethod == codec.MethodFence {
				// The lane's own: answered once the sends before it ran
				// (sendq.go), and no hook of the user's sees it.
				c.queueSend(sendItem{e: e, fr: fr, fence: true})
				continue
			}
		case codec.KindCast, codec.KindSend:
		default:
			c.frameDone(fr)
			continue
		}
		// Without request hooks the entry's context is made where it runs,
		// keeping this path as short as it was: it delays every later frame.
		var ec *entryCtx
		if hooks != 0 {
			ec = entryContext(c, e, arrived, fr)
			if err := c.p.readEntry(ec, e, hooks); err != nil {
				c.p.refuse(c, ec, e, err)
				continue
			}
		}
		if e.Kind == codec.KindSend {
			c.queueSend(sendItem{ec: ec, e: e, fr: fr})
			continue
		}
		c.p.start(task{c: c, e: e, ec: ec, fr: fr})
	}
}
