package batchserver

import (
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/settle"
)

// The reply side of a connection: replies and credits queued by the
// entries that finished, and the one goroutine that frames and writes
// them (the connection's writer, started on demand).

func (c *conn) queuedReplies() int { return int(c.nReply.Load()) }

// queueReply hands a call's reply to the connection's writer; the reply
// also gives the call's place in the window back to the lane, and its
// frame's bytes once the call was the frame's last unfinished entry.
func (c *conn) queueReply(rp codec.Reply, fr *frameHold) {
	c.frameDone(fr)
	c.replyMu.Lock()
	// Under replyMu, with the reply queued in the same step: a drain that
	// sees no entry in flight sees its reply (conn.idle).
	c.inflight.Add(-1)
	if c.broken {
		c.replyMu.Unlock()
		return
	}
	c.replies = append(c.replies, c.capReply(rp))
	c.unwritten.Add(1)
	c.nReply.Store(int32(len(c.replies)))
	start := c.claimWriterLocked()
	c.replyMu.Unlock()
	if start {
		c.startWriter()
	}
}

// credit records a finished cast or send: its place in the lane's window
// (and its frame's bytes, once it was the frame's last unfinished entry)
// goes back to the client in the next credit message.
func (c *conn) credit(fr *frameHold) {
	c.frameDone(fr)
	c.inflight.Add(-1)
	c.credits.Add(1)
	c.replyMu.Lock()
	start := !c.broken && c.claimWriterLocked()
	c.replyMu.Unlock()
	if start {
		c.startWriter()
	}
}

// queueUnrun has the connection's writer tell the lane that the calls ids
// did not run (codec.MethodUnrun).
func (c *conn) queueUnrun(ids []uint64) {
	if len(ids) == 0 {
		return
	}
	c.replyMu.Lock()
	if c.broken {
		c.replyMu.Unlock()
		return
	}
	c.unrun = append(c.unrun, ids...)
	start := c.claimWriterLocked()
	c.replyMu.Unlock()
	if start {
		c.startWriter()
	}
}

// claimWriterLocked reports whether the caller, holding replyMu, is to
// start the connection's writer: none runs, and from now on one counts as
// running (writing), so that only one caller starts it.
func (c *conn) claimWriterLocked() bool { return claim(&c.writing) }

// startWriter starts the writer the caller claimed (claimWriterLocked),
// after it unlocked replyMu.
//
// The writer is the only path to the socket for replies, credits, drain
// notices and server heartbeats (rpcx's own writes aside, see
// writeFrame). It is a goroutine started when there is something to write
// and ended when nothing is left, so that an idle connection holds no
// goroutine beside rpcx's read loop, as on plain rpcx. An entry's
// goroutine that wrote its own reply on a quiet connection (handing the
// socket from one to the next) was no faster in BenchmarkCall or
// BenchmarkCast at one goroutine or a hundred (docs/performance-history.md,
// "reply writer"), and a slow socket then held up a handler's goroutine.
func (c *conn) startWriter() { c.p.tasks.spawn(c.writeReplies) }

// writeReplies is the connection's writer: it takes whatever is queued, up
// to the caps, writes it as one frame with one Write, and repeats until
// nothing is left; it never waits for more.
//
// Before each take it settles (settle.Settle) while entries of its
// connection are unfinished: freshly started, it runs ahead of the entry
// goroutines of the same frame that are about to reply, and lets them
// queue; writing at once shipped smaller frames. With none unfinished no
// reply of its own is on its way, and it writes at once: a settle there
// yielded for other connections' entries and kept the writer alive
// meanwhile (docs/performance-history.md, "reply writer").
func (c *conn) writeReplies() {
	for {
		if c.inflight.Load() > 0 {
			settle.Settle(c.queuedReplies, c.p.opts.BatchCap, c.p.workers.waiting)
		}
		c.replyMu.Lock()
		batch := c.replies
		credits := c.credits.Swap(0)
		freed := c.bytes.credit.Swap(0)
		notice := c.drainNotice.Swap(false)
		ping := c.pingWanted.Swap(false)
		unrun := c.unrun
		c.unrun = nil
		if len(batch) == 0 && credits == 0 && freed == 0 && !notice && !ping && len(unrun) == 0 {
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
			if err := c.writeFrame(batch[:n], credits, freed, notice, ping, unrun); err != nil {
				c.p.metrics.errWrite.Inc(1)
				logf("rpcxbatch: writing replies to %s: %v", c.c.RemoteAddr(), err)
				c.replyMu.Lock()
				c.broken, c.writing, c.replies = true, false, nil
				c.replyMu.Unlock()
				c.c.Close()
				return
			}
			c.unwritten.Add(-int64(n))
			batch, credits, freed, notice, ping, unrun = batch[n:], 0, 0, false, false, nil
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
// notice), an unrun notice (for the calls unrun), a credit message (when
// credits or freed bytes > 0) and a reply frame (when there are replies)
// with one Write.
func (c *conn) writeFrame(replies []codec.Reply, credits, freed int64, notice, ping bool, unrun []uint64) error {
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
	if len(unrun) > 0 {
		var mark codec.MessageMark
		b, mark = codec.StartMessage(b, &h, codec.ServicePath, codec.MethodUnrun, nil)
		b = codec.AppendUnrun(b, c.p.incarnation, unrun)
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
	c.frames.Add(1)
	// rpcx writes heartbeats and errors on this conn too. Without a write
	// timeout of its own it never sets a deadline: clear ours. With one,
	// it sets its own before each write, and a clear could land just
	// after, while that write waits for the peer: it would then wait
	// without a bound (a deadline applies to writes in progress too).
	if !c.p.rpcxDeadlines {
		c.c.SetWriteDeadline(time.Time{})
	}
	return nil
}
