package batchserver

// A connection keeps what its replies were written with for the next
// ones: the frame buffer (up to 4 MiB), the reply slices and up to
// maxKeptReplyBufs payload buffers, each sized by the busiest moment so
// far; and the room of its send queue. A lane sends a heartbeat only when it has heard nothing from the
// server for its heartbeat interval (half a second by default), so a
// heartbeat means the connection's reply path has been quiet: then these
// are let go, and a connection's memory follows its load down instead of
// staying at its peak while it is kept open. The next reply allocates
// what it needs anew.

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
