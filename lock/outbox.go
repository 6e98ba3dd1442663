package lock

import (
	"context"
	"time"

	"github.com/smallnest/rpcx/client"
)

// One-way messages that must arrive (Release, Abort, Drop) wait in their
// peer's outbox, a queue, and its sender goroutine starts them as
// asynchronous calls, a bounded number at a time, and retries the ones
// that fail. A release costs the releasing goroutine an append to a slice:
// no goroutine, no context and no timer of its own, and a node that does
// not answer holds back only its own messages. Nothing is dropped while
// the node answers: the releases of one holder to one node wait merged in
// its relBox, which has one entry in the queue at most, so the queue is
// bounded by the holders, not by how fast they release.

const (
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
	// box is set on a relBox's queue entry: the sender makes the
	// Release from the box when it starts it.
	box *relBox
	// from and epoch are set on a Release made from a box: it is not
	// retried once a later request carried its keys (stale).
	from  *relBox
	epoch uint64
}

// send delivers a one-way message (Release, Abort, Drop) to node addr in
// the background: retried until it is acknowledged, the node is closed or
// giveUpAfter has passed since its first try (the other node drops the
// locks of a node it cannot reach for NodeTimeout by itself). A closing
// node tries once.
func (n *Node) send(addr, method string, args any) {
	n.sendMsg(addr, &oneway{method: method, args: args}, false)
}

// sendMsg is send for a message made by the caller.
// With lingering set, m is a relBox's entry that lingers: the sender is
// woken for it only when it is the first in the queue.
func (n *Node) sendMsg(addr string, m *oneway, lingering bool) {
	// Queued under n.mu, so that an idle sender that ends (sendTo) never
	// leaves a message behind. A read lock is enough for a peer that
	// exists (forgetIdle takes the write lock).
	var first bool
	n.mu.RLock()
	p := n.peers[addr]
	if p != nil {
		first = p.enqueue(n, m)
		n.mu.RUnlock()
	} else {
		n.mu.RUnlock()
		n.mu.Lock()
		p = n.peerLocked(addr)
		if p != nil {
			first = p.enqueue(n, m)
		}
		n.mu.Unlock()
		if p == nil {
			if m.box != nil {
				m.box.unqueued()
			}
			return
		}
	}
	if lingering && !first {
		// A lingering Release behind others: the sender wakes when the
		// queue's first lingering entry is due at the latest, and every
		// one lingers as long. Not waking it for each spares a goroutine
		// switch per release.
		return
	}
	p.wakeSender()
}

// wakeSender makes p's sender look at its queue.
func (p *peer) wakeSender() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// enqueue queues m; it reports whether m is the first in the queue. n.mu
// is held, read or write.
func (p *peer) enqueue(n *Node, m *oneway) (first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, m)
	n.sending.Add(1)
	return len(p.queue) == 1
}

// wakeFor wakes the sender for node addr, if it has one: a lingering
// entry in its queue must go at once.
func (n *Node) wakeFor(addr string) {
	n.mu.RLock()
	p := n.peers[addr]
	n.mu.RUnlock()
	if p != nil {
		p.wakeSender()
	}
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
	// next is when the first lingering Release in the queue is due, as
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
// retries first, then the queue in order. A relBox's entry makes its
// Release when it is started; it stays in the queue while it lingers, and
// leaves it without a message when a request carried its keys.
func (s *sender) fill() {
	now := time.Now()
	for len(s.ready) > 0 && len(s.inflight) < s.limit {
		m := s.ready[0]
		s.ready = s.ready[1:]
		if m.stale() {
			s.n.sending.Add(-1)
			continue
		}
		s.start(m, now)
	}
	room := s.limit - len(s.inflight)
	starts := s.starting[:0]
	var next time.Time
	s.p.mu.Lock()
	q := s.p.queue
	kept := q[:0]
scan:
	for i, m := range q {
		if m.box == nil {
			if len(starts) < room {
				starts = append(starts, m)
				continue
			}
			// No room in flight: the rest waits, in order.
			kept = append(kept, q[i:]...)
			break scan
		}
		from := len(starts)
		var keep bool
		var until time.Time
		starts, keep, until = m.box.take(now, len(starts) < room, starts)
		switch {
		case len(starts) > from:
			// The entry leaves the queue and its messages take its
			// place in the count of messages being sent.
			s.n.sending.Add(int64(len(starts) - from - 1))
		case keep && until.IsZero():
			kept = append(kept, q[i:]...)
			break scan
		case keep:
			kept = append(kept, m)
			if next.IsZero() || until.Before(next) {
				next = until
			}
		default:
			s.n.sending.Add(-1)
		}
	}
	clear(q[len(kept):])
	s.p.queue = kept
	s.next = next
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
// (zero: none lingers).
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
	if m.stale() {
		// A later request carried its keys, or the holder's Drop.
		s.n.sending.Add(-1)
		return
	}
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
