package lock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
)

// One-way messages that must arrive (Release, Abort, Drop) wait in their
// peer's outbox, a bounded queue, and its sender goroutine starts them as
// asynchronous calls, a bounded number at a time, and retries the ones
// that fail. A release costs the releasing goroutine an append to a slice:
// no goroutine, no context and no timer of its own, and a node that does
// not answer holds back only its own messages.

const (
	// outboxLimit bounds the messages waiting for one peer; more are not
	// sent, and counted in Stats.Undelivered.
	outboxLimit = 1 << 16
	// inFlightLimit bounds the calls in flight to one peer over a
	// Transport that can start a call without waiting (Go).
	inFlightLimit = 4096
	// syncInFlightLimit is the same over a Transport that has only Call:
	// each call in flight then takes a goroutine.
	syncInFlightLimit = 64
	// giveUpAfter is how long a message is retried before it is dropped.
	giveUpAfter = 30 * time.Second
)

// asyncTransport is a Transport that starts a call and returns at once,
// sending the call on done when it completes (as rpcx's Client.Go does).
// *batchclient.Client and PlainTransport have it.
type asyncTransport interface {
	Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call
}

// oneway is a message that must reach its node.
type oneway struct {
	method  string
	args    any
	giveUp  time.Time // set by its first try
	backoff time.Duration
	due     time.Time // when a failed try is repeated
	sent    time.Time // when the try in flight started
	// notBefore is when a lingering Release may go (zero: at once).
	notBefore time.Time
	// obsolete is set when a request carried what the message does
	// (Holder.releaseRemote): it is not sent.
	obsolete atomic.Bool
}

// send delivers a one-way message (Release, Abort, Drop) to node addr in
// the background: retried until it is acknowledged, the node is closed or
// giveUpAfter has passed since its first try (the other node drops the
// locks of a node it cannot reach for NodeTimeout by itself). A closing
// node tries once.
func (n *Node) send(addr, method string, args any) {
	n.sendMsg(addr, &oneway{method: method, args: args})
}

// sendMsg is send for a message made by the caller.
func (n *Node) sendMsg(addr string, m *oneway) {
	// Queued under n.mu, so that an idle sender that ends (sendTo) never
	// leaves a message behind. A read lock is enough for a peer that
	// exists (forgetIdle takes the write lock).
	var full, first bool
	n.mu.RLock()
	p := n.peers[addr]
	if p != nil {
		full, first = p.enqueue(n, m)
		n.mu.RUnlock()
	} else {
		n.mu.RUnlock()
		n.mu.Lock()
		p = n.peerLocked(addr)
		if p != nil {
			full, first = p.enqueue(n, m)
		}
		n.mu.Unlock()
		if p == nil {
			return
		}
	}
	if full {
		n.undelivered.Add(1)
		return
	}
	if !m.notBefore.IsZero() && !first {
		// A lingering Release behind others: the sender wakes when the
		// queue's head is due at the latest, and every one lingers as
		// long. Not waking it for each spares a goroutine switch per
		// release.
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// enqueue queues m; it reports whether the queue was full (m dropped) and
// whether m is the first in the queue. n.mu is held, read or write.
func (p *peer) enqueue(n *Node, m *oneway) (full, first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) >= outboxLimit {
		p.compact(n)
	}
	if len(p.queue) >= outboxLimit {
		return true, false
	}
	p.queue = append(p.queue, m)
	n.sending.Add(1)
	return false, len(p.queue) == 1
}

// compact drops the obsolete messages from the queue (lingering releases
// that a request carried, which the sender has not looked at yet). p.mu
// is held.
func (p *peer) compact(n *Node) {
	kept := p.queue[:0]
	for _, m := range p.queue {
		if m.obsolete.Load() {
			n.sending.Add(-1)
			continue
		}
		kept = append(kept, m)
	}
	clear(p.queue[len(kept):])
	p.queue = kept
}

// sender is the state of one peer's sender goroutine; only that goroutine
// uses it.
type sender struct {
	n        *Node
	p        *peer
	async    asyncTransport // nil: calls run on goroutines of their own
	limit    int
	inflight map[*client.Call]*oneway
	ready    []*oneway // retries that are due, sent before the queue
	later    []*oneway // retries waiting for their backoff
	// next is when the lingering Release at the queue's head is due, as
	// fill last saw it (zero: none).
	next time.Time
	// starting is fill's scratch list of the messages it starts.
	starting []*oneway

	// A call's context is a window shared by the calls started within
	// NodeTimeout/4 of each other: each gets 3/4 to all of NodeTimeout.
	win     context.Context
	winFrom time.Time
	cancels []windowCancel
}

type windowCancel struct {
	end    time.Time
	cancel context.CancelFunc
}

func newSender(n *Node, p *peer) *sender {
	s := &sender{n: n, p: p, inflight: make(map[*client.Call]*oneway), limit: syncInFlightLimit}
	if a, ok := n.cfg.Transport.(asyncTransport); ok {
		s.async, s.limit = a, inFlightLimit
	}
	return s
}

// window returns the context for a call started now.
func (s *sender) window(now time.Time) context.Context {
	if s.win == nil || now.Sub(s.winFrom) > s.n.cfg.NodeTimeout/4 {
		kept := s.cancels[:0]
		for _, w := range s.cancels {
			if now.After(w.end) {
				w.cancel()
			} else {
				kept = append(kept, w)
			}
		}
		s.cancels = kept
		end := now.Add(s.n.cfg.NodeTimeout)
		var cancel context.CancelFunc
		s.win, cancel = context.WithDeadline(s.n.ctx, end)
		s.winFrom = now
		s.cancels = append(s.cancels, windowCancel{end, cancel})
	}
	return s.win
}

// stop ends the sender: its windows are cancelled.
func (s *sender) stop() {
	for _, w := range s.cancels {
		w.cancel()
	}
}

// busy reports whether the sender has messages to deliver.
func (s *sender) busy() bool {
	if len(s.inflight) > 0 || len(s.ready) > 0 || len(s.later) > 0 {
		return true
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return len(s.p.queue) > 0
}

// fill starts messages while fewer than limit are in flight: the due
// retries first, then the queue in order. A lingering Release stays in the
// queue until its time comes; an obsolete one is dropped.
func (s *sender) fill() {
	now := time.Now()
	for len(s.ready) > 0 && len(s.inflight) < s.limit {
		m := s.ready[0]
		s.ready = s.ready[1:]
		s.start(m, now)
	}
	room := s.limit - len(s.inflight)
	starts := s.starting[:0]
	s.p.mu.Lock()
	q := s.p.queue
	kept := q[:0]
scan:
	for i, m := range q {
		switch {
		case m.obsolete.Load():
			s.n.sending.Add(-1)
		case now.Before(m.notBefore):
			kept = append(kept, m)
		case len(starts) < room:
			starts = append(starts, m)
		default:
			// No room in flight: the rest waits, in order.
			kept = append(kept, q[i:]...)
			break scan
		}
	}
	clear(q[len(kept):])
	s.p.queue = kept
	s.next = time.Time{}
	if len(kept) > 0 && !kept[0].notBefore.IsZero() {
		s.next = kept[0].notBefore
	}
	s.p.mu.Unlock()
	// Started without p.mu: a call to a peer still connecting may wait,
	// and a release must not wait for it.
	for _, m := range starts {
		if m.giveUp.IsZero() {
			m.giveUp = now.Add(giveUpAfter)
			m.backoff = 10 * time.Millisecond
		}
		s.start(m, now)
	}
	clear(starts)
	s.starting = starts[:0]
}

// nextLinger returns when the first lingering Release in the queue is due
// (zero: none lingers at its head).
func (s *sender) nextLinger() time.Time {
	return s.next
}

// start starts one try of m.
func (s *sender) start(m *oneway, now time.Time) {
	m.sent = now
	ctx := s.window(now)
	var call *client.Call
	if s.async != nil {
		call = s.async.Go(ctx, s.p.addr, ServicePath, m.method, m.args, &Ack{}, s.p.done)
	} else {
		call = &client.Call{ServicePath: ServicePath, ServiceMethod: m.method, Args: m.args, Done: s.p.done}
		s.n.wg.Add(1)
		go func() {
			defer s.n.wg.Done()
			call.Error = s.n.cfg.Transport.Call(ctx, s.p.addr, ServicePath, m.method, m.args, &Ack{})
			call.Done <- call
		}()
	}
	s.inflight[call] = m
}

// finish takes the outcome of a call: done, or retried after its backoff.
func (s *sender) finish(c *client.Call) {
	m := s.inflight[c]
	if m == nil {
		// Swept (see sweep): its retry is on its way already.
		return
	}
	delete(s.inflight, c)
	if c.Error == nil {
		s.n.sending.Add(-1)
		return
	}
	s.failed(m, time.Now())
}

// failed schedules m's next try, or drops it.
func (s *sender) failed(m *oneway, now time.Time) {
	// A closing node tries once: its Ping then answers as a node that
	// ended, which makes what this message would undo obsolete on the
	// other node anyway.
	if s.n.ctx.Err() != nil || s.n.isClosed() || now.After(m.giveUp) {
		s.n.sending.Add(-1)
		s.n.undelivered.Add(1)
		return
	}
	m.due = now.Add(m.backoff)
	m.backoff = min(2*m.backoff, 500*time.Millisecond)
	s.later = append(s.later, m)
}

// due moves the retries whose backoff is over to ready, and returns when
// the next one is due (zero: none waits).
func (s *sender) due(now time.Time) time.Time {
	var next time.Time
	kept := s.later[:0]
	for _, m := range s.later {
		if !now.Before(m.due) {
			s.ready = append(s.ready, m)
			continue
		}
		kept = append(kept, m)
		if next.IsZero() || m.due.Before(next) {
			next = m.due
		}
	}
	clear(s.later[len(kept):])
	s.later = kept
	return next
}

// sweep fails the calls in flight for longer than their window allows: a
// transport that does not end a call with its context (rpcx's Go) is not
// waited for past it. A late completion of a swept call is ignored.
func (s *sender) sweep(now time.Time) {
	limit := s.n.cfg.NodeTimeout + s.n.cfg.NodeTimeout/2
	for c, m := range s.inflight {
		if now.Sub(m.sent) > limit {
			delete(s.inflight, c)
			s.failed(m, now)
		}
	}
}
