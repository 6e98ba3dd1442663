package batchserver

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/settle"
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
	p *Plugin
	c net.Conn

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

	// Window. inflight counts the entries delivered and not yet finished;
	// credits counts finished casts and sends not yet credited back.
	inflight atomic.Int64
	credits  atomic.Int64
	// bytes is the byte window's part (bytewindow.go).
	bytes byteWindow

	// Replies. At most one writer goroutine runs per connection: it is
	// started when the first reply or credit is queued and exits when there
	// is none left, so an idle or closed connection holds no goroutine.
	replyMu sync.Mutex   // guards replies, spare, writing, broken and buf
	nReply  atomic.Int32 // len(replies), readable without replyMu
	replies []codec.Reply
	spare   []codec.Reply
	writing bool
	broken  bool
	buf     []byte
	// drainNotice asks the writer for a drain notice (see shutdown.go).
	drainNotice atomic.Bool
	// pingWanted asks the writer for a server heartbeat (see busyping.go).
	pingWanted atomic.Bool

	// replyBufs recycles reply payloads; written collects the payloads of
	// the frame being written (used only by the writer).
	replyBufs replyBufs
	written   [][]byte

	// sends runs the connection's send entries in lane order.
	sends sendQueue
}

func newConn(p *Plugin, c net.Conn) *conn {
	st := &conn{p: p, c: c, nextSeq: 1, held: make(map[uint64]heldFrame)}
	st.maxReply.Store(int64(p.opts.MaxFrameBytes))
	return st
}

// capReply replaces a reply that would not fit a frame with an error.
func (c *conn) capReply(rp codec.Reply) codec.Reply {
	if n, max := codec.ReplySize(&rp), int(c.maxReply.Load()); n > max {
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
func (c *conn) deliver(seq uint64, entries []codec.Entry, size int, arrived time.Time) {
	// A lane keeps at most Window entries unfinished; twice that is a peer
	// that ignores the window, not a slow moment.
	if n := c.inflight.Add(int64(len(entries))); n > 2*int64(c.p.opts.Window) {
		c.fail(fmt.Errorf("%w: %d entries unfinished, window %d", ErrWindowExceeded, n, c.p.opts.Window))
		return
	}
	fr, err := c.hold(size, len(entries))
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
	c.held[seq] = heldFrame{entries: entries, arrived: arrived, fr: fr}
	if gap && c.gapTimer == nil {
		// A frame before this one is missing. rpcx hands frames to
		// goroutines, so it is normally a moment away; but rpcx may also
		// have dropped it (a rate-limiting plugin), and then this lane
		// would wait forever. A gap that lasts is a broken connection.
		want := c.nextSeq
		c.gapTimer = time.AfterFunc(maxGap, func() { c.gapExpired(want) })
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
		next, ok := c.held[c.nextSeq]
		if !ok {
			break
		}
		delete(c.held, c.nextSeq)
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

// gapExpired closes the connection if frame want is still missing.
func (c *conn) gapExpired(want uint64) {
	c.orderMu.Lock()
	current := c.nextSeq == want
	held := len(c.held)
	if current {
		// Only this timer's own gap: a timer that fired as deliver moved
		// past want (too late for Stop) must not drop the reference to
		// the timer armed for the next gap.
		c.gapTimer = nil
	}
	c.orderMu.Unlock()
	if current && held > 0 {
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
	for i := range entries {
		e := &entries[i]
		switch e.Kind {
		case codec.KindCall:
			c.p.metrics.calls.Inc(1)
		case codec.KindCast:
			c.p.metrics.casts.Inc(1)
		case codec.KindSend:
			c.p.metrics.sends.Inc(1)
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
			c.queueSend(sendItem{ec: ec, e: e, arrived: arrived, fr: fr})
			continue
		}
		c.p.start(task{c: c, e: e, ec: ec, arrived: arrived, fr: fr})
	}
}

func (c *conn) queuedReplies() int { return int(c.nReply.Load()) }

// queueReply hands a call's reply to the connection's writer; the reply
// also gives the call's place in the window back to the lane, and its
// frame's bytes once the call was the frame's last unfinished entry. With
// own, the caller is the goroutine that ran the call, and when no writer
// runs and no other entry is unfinished it writes the reply itself (see
// kickLocked).
func (c *conn) queueReply(rp codec.Reply, fr *frameHold, own bool) {
	c.frameDone(fr)
	c.replyMu.Lock()
	// Under replyMu, with the reply queued in the same step: a drain that
	// sees no entry in flight sees its reply (conn.idle).
	left := c.inflight.Add(-1)
	if c.broken {
		c.replyMu.Unlock()
		return
	}
	c.replies = append(c.replies, c.capReply(rp))
	c.nReply.Store(int32(len(c.replies)))
	c.kickLocked(own && left == 0)
}

// credit records a finished cast or send: its place in the lane's window
// (and its frame's bytes, once it was the frame's last unfinished entry)
// goes back to the client in the next credit message. own is as for
// queueReply.
func (c *conn) credit(fr *frameHold, own bool) {
	c.frameDone(fr)
	left := c.inflight.Add(-1)
	c.credits.Add(1)
	c.replyMu.Lock()
	if c.broken {
		c.replyMu.Unlock()
		return
	}
	c.kickLocked(own && left == 0)
}

// kickLocked starts the writer unless it runs; it unlocks replyMu.
//
// With own, the caller is the goroutine that ran the connection's last
// unfinished entry, whose reply or credit it just queued, and it becomes
// the writer itself: it takes whatever is queued, as a writer goroutine
// would, writes it, and goes on until nothing is left (flat combining). A
// reply then costs no goroutine start and no hand-off when the connection
// is quiet. While other entries of the connection are unfinished their
// replies are on the way, and a writer goroutine of its own settles for
// them (settle.Settle) as before: an entry's goroutine that wrote at once
// shipped frames of 2-3 replies where the writer shipped 4 (10 callers),
// and under load one goroutine owns the socket at a time either way
// (writing is the token). Only the goroutines of entries write in place:
// the delivery path, the send queue, heartbeats and drain notices hand the
// writing to a goroutine of its own, so that a slow socket never holds
// them up.
func (c *conn) kickLocked(own bool) {
	start := !c.writing
	c.writing = true
	c.replyMu.Unlock()
	switch {
	case !start:
	case own:
		c.p.tasks.run(c.writeReplies)
	default:
		c.p.tasks.spawn(c.writeReplies)
	}
}

// writeReplies is the connection's only writer of replies and credits. It
// takes whatever is queued, up to the caps, writes it as one frame with one
// Write, and repeats until nothing is left; it never waits for more.
func (c *conn) writeReplies() {
	for {
		// Freshly started, this goroutine runs ahead of the call goroutines
		// of the same frame that are about to reply: let them queue first.
		settle.Settle(c.queuedReplies, c.p.opts.BatchCap, c.p.workers.waiting)
		c.replyMu.Lock()
		batch := c.replies
		credits := c.credits.Swap(0)
		freed := c.bytes.credit.Swap(0)
		notice := c.drainNotice.Swap(false)
		ping := c.pingWanted.Swap(false)
		if len(batch) == 0 && credits == 0 && freed == 0 && !notice && !ping {
			c.writing = false
			c.replyMu.Unlock()
			return
		}
		c.replies, c.spare = c.spare[:0], nil
		c.nReply.Store(0)
		c.replyMu.Unlock()

		taken := batch
		for first := true; first || len(batch) > 0; first = false {
			n := c.fit(batch)
			if err := c.writeFrame(batch[:n], credits, freed, notice, ping); err != nil {
				c.p.metrics.errWrite.Inc(1)
				logf("rpcxbatch: writing replies to %s: %v", c.c.RemoteAddr(), err)
				c.replyMu.Lock()
				c.broken, c.writing, c.replies = true, false, nil
				c.replyMu.Unlock()
				c.c.Close()
				return
			}
			batch, credits, freed, notice, ping = batch[n:], 0, 0, false, false
		}
		c.replyMu.Lock()
		if c.spare == nil {
			c.spare = taken[:0]
		}
		c.replyMu.Unlock()
	}
}

// fit returns how many replies from the front of batch fit one frame: at
// least one (if any), at most the batch cap, within the byte cap.
func (c *conn) fit(batch []codec.Reply) int {
	n, size := 0, 0
	for n < len(batch) && n < c.p.opts.BatchCap {
		size += codec.ReplySize(&batch[n])
		if n > 0 && size > int(c.maxReply.Load()) {
			break
		}
		n++
	}
	return n
}

// writeFrame writes a server heartbeat (when ping), a drain notice (when
// notice), a credit message (when credits or freed bytes > 0) and a reply
// frame (when there are replies) with one Write.
func (c *conn) writeFrame(replies []codec.Reply, credits, freed int64, notice, ping bool) error {
	h := codec.OnewayHeader(0)
	b := c.buf[:0]
	if ping {
		b = appendPing(b)
	}
	if notice {
		var mark codec.MessageMark
		b, mark = codec.StartMessage(b, &h, codec.ServicePath, codec.MethodDrain, nil)
		b = codec.AppendDrain(b, c.p.incarnation)
		codec.FinishMessage(b, mark)
	}
	if credits > 0 || freed > 0 {
		var mark codec.MessageMark
		b, mark = codec.StartMessage(b, &h, codec.ServicePath, codec.MethodCredit, nil)
		if freed > 0 {
			b = codec.AppendCreditBytes(b, c.p.incarnation, uint64(credits), uint64(freed))
		} else {
			b = codec.AppendCredit(b, c.p.incarnation, uint64(credits))
		}
		codec.FinishMessage(b, mark)
	}
	if len(replies) > 0 {
		var mark codec.MessageMark
		b, mark = codec.StartMessage(b, &h, codec.ServicePath, codec.MethodReply, nil)
		b = codec.AppendReplyHeader(b, c.p.incarnation, len(replies))
		written := c.written[:0]
		for i := range replies {
			b = codec.AppendReply(b, &replies[i])
			written = append(written, replies[i].Payload)
			replies[i] = codec.Reply{}
		}
		// Copied into the frame: the buffers can take the next replies.
		c.replyBufs.putPayloads(written)
		clear(written)
		c.written = written[:0]
		codec.FinishMessage(b, mark)
		b = c.compressReplies(b, mark)
		c.p.metrics.replyFrames.Inc(1)
		c.p.metrics.replyBatch.Update(int64(len(replies)))
	}
	// Keep a moderate buffer for the next frame, not a rare huge one.
	if cap(b) <= 4<<20 {
		c.buf = b
	}
	c.c.SetWriteDeadline(time.Now().Add(c.p.opts.WriteTimeout))
	if _, err := c.c.Write(b); err != nil {
		// Closed before the deadline is cleared: see pushes.go.
		c.c.Close()
		return err
	}
	// rpcx writes heartbeats and errors on this conn too, and without a write
	// timeout of its own it never sets a deadline: clear ours.
	c.c.SetWriteDeadline(time.Time{})
	return nil
}
