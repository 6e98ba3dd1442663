package batchserver

// A connection keeps what its replies were written with for the next
// ones: the frame buffer (up to 4 MiB), the reply slices and up to
// maxKeptReplyBufs payload buffers, each sized by the busiest moment so
// far; and the room of its send queue. Once its reply path has been quiet
// (no frame written between two of the janitor's looks, or a heartbeat
// from the lane, which sends one only when it has heard nothing for its
// heartbeat interval) these are let go, and a connection's memory follows
// its load down instead of staying at its peak while it is kept open. The
// next reply allocates what it needs anew.

// shedIfQuiet sheds the connection once when it has written no frame since
// the janitor's last look. Only the janitor's look calls it, under lookMu.
func (c *conn) shedIfQuiet() {
	n := c.frames.Load()
	if n != c.seenFrames {
		c.seenFrames, c.quietShed = n, false
		return
	}
	if !c.quietShed {
		c.quietShed = true
		c.shed()
	}
}

// shed lets go of the connection's reply buffers, unless a writer is at
// work or replies are queued, and of its send queue's room, unless sends
// run.
func (c *conn) shed() {
	c.replyMu.Lock()
	if !c.writing && len(c.replies) == 0 {
		// Without a writer nothing else uses buf and written: taking the
		// writer's place (writing) needs replyMu.
		c.buf, c.written, c.replies, c.spare = nil, nil, nil, nil
	}
	c.replyMu.Unlock()
	c.orderMu.Lock()
	if len(c.held) == 0 {
		c.held = nil // a map keeps its buckets once emptied
	}
	c.orderMu.Unlock()
	c.replyBufs.shed()
	c.sends.shed()
}

// shed empties the free list.
func (r *replyBufs) shed() {
	r.mu.Lock()
	clear(r.free)
	r.free = nil
	r.mu.Unlock()
}
