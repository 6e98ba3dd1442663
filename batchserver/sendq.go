package batchserver

import (
	"sync"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// sendQueue runs the send entries of one connection one after another, in
// the order the lane wrote them, on a goroutine of its own: a slow send
// handler delays the later sends of its lane (that is the order promised)
// but never the calls and casts of later frames, which the delivery path
// hands out meanwhile. The goroutine is started when a send is queued and
// ends when none is left, so an idle connection holds none. The queue is
// bounded by the lane's window: each send holds its place until it ran.
type sendQueue struct {
	mu      sync.Mutex // guards items, spare and running
	items   []sendItem
	spare   []sendItem
	running bool
}

// sendItem is one send entry, its context (nil until it runs, when the
// server has no request hooks) and its frame, which knows when it arrived.
type sendItem struct {
	ec *entryCtx
	e  *codec.Entry
	fr *frameHold
	// fence marks a lane's fence call (codec.MethodFence): in its turn it
	// is answered, not run.
	fence bool
}

// queueSend appends a send entry to the connection's queue.
func (c *conn) queueSend(it sendItem) {
	q := &c.sends
	q.mu.Lock()
	q.items = append(q.items, it)
	start := claim(&q.running)
	q.mu.Unlock()
	if start {
		c.p.tasks.spawn(c.runSends)
	}
}

// runSends runs queued sends in order until the queue is empty.
func (c *conn) runSends() {
	q := &c.sends
	for {
		q.mu.Lock()
		batch := q.items
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.items, q.spare = q.spare[:0], nil
		q.mu.Unlock()
		for i := range batch {
			it := &batch[i]
			if it.fence {
				// Every send before it has run.
				c.queueReply(codec.Reply{ID: it.e.ID, Status: codec.StatusOK}, it.fr)
				batch[i] = sendItem{}
				continue
			}
			if it.ec == nil {
				it.ec = entryContext(c, it.e, it.fr.arrived, it.fr)
			}
			c.p.runSend(c, it.ec, it.e)
			c.credit(it.fr)
			batch[i] = sendItem{}
		}
		q.mu.Lock()
		if q.spare == nil {
			q.spare = batch[:0]
		}
		q.mu.Unlock()
	}
}

// shed lets go of the queue's room while no send runs or waits: a burst
// of sends left it sized by the burst (up to the lane's window).
func (q *sendQueue) shed() {
	q.mu.Lock()
	if !q.running && len(q.items) == 0 {
		q.items, q.spare = nil, nil
	}
	q.mu.Unlock()
}
