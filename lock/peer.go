package lock

import (
	"sync"
	"time"

	"github.com/smallnest/rpcx/client"
)

// peerQueue bounds the casts (deadlock probes and verdicts) waiting to go
// to one other node; more are dropped, since every waiting request walks
// again after ProbeInterval anyway.
const peerQueue = 1024

// peerIdle is how many NodeTimeouts a peer's sender stays without work
// before it ends.
const peerIdle = 4

// peer is another node this node talks to. Everything this node sends it
// on its own (probes and verdicts, and the one-way messages of outbox.go)
// goes through the peer's sender goroutine, so that neither a deadlock
// walk nor a release waits on the network: a frozen peer delays nothing
// but its own messages.
type peer struct {
	addr string
	out  chan cast

	mu    sync.Mutex // guards queue
	queue []*oneway  // one-way messages not yet started (outbox.go)
	wake  chan struct{}
	done  chan *client.Call // completions of the calls in flight
}

// cast is one one-way message for a peer.
type cast struct {
	method string
	args   any
}

// peerLocked returns the peer at addr, starting its sender on first use;
// nil once the node stopped. n.mu is held.
func (n *Node) peerLocked(addr string) *peer {
	if p := n.peers[addr]; p != nil {
		return p
	}
	if n.stopped || n.cfg.Transport == nil {
		return nil
	}
	p := &peer{
		addr: addr,
		out:  make(chan cast, peerQueue),
		wake: make(chan struct{}, 1),
		done: make(chan *client.Call, inFlightLimit),
	}
	n.peers[addr] = p
	n.wg.Add(1)
	go n.sendTo(p)
	return p
}

// castTo queues a one-way message for node addr without waiting; it is
// dropped when the peer's queue is full.
func (n *Node) castTo(addr, method string, args any) {
	if addr == "" || addr == n.cfg.Addr {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// Queued under n.mu, so that an idle sender that ends (sendTo) never
	// leaves a cast behind in its queue.
	p := n.peerLocked(addr)
	if p == nil {
		return
	}
	select {
	case p.out <- cast{method, args}:
	default:
	}
}

// sendTo delivers p's casts and one-way messages until the node closes,
// or until it had nothing to send for peerIdle × NodeTimeout: then p is
// forgotten, so that addresses named once (a dead node, a typo) cost
// nothing for good. Each cast has NodeTimeout to go out.
func (n *Node) sendTo(p *peer) {
	defer n.wg.Done()
	s := newSender(n, p)
	defer s.stop()
	idle := time.NewTimer(peerIdle * n.cfg.NodeTimeout)
	defer idle.Stop()
	sweep := time.NewTicker(n.cfg.NodeTimeout / 2)
	defer sweep.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-idle.C:
			if !s.busy() && n.forgetIdle(p) {
				return
			}
			idle.Reset(peerIdle * n.cfg.NodeTimeout)
			continue
		case c := <-p.out:
			_ = n.cfg.Transport.Cast(s.window(time.Now()), p.addr, ServicePath, c.method, c.args)
		case <-p.wake:
		case c := <-p.done:
			s.finish(c)
			// Take what else completed meanwhile before starting more.
			for more := true; more; {
				select {
				case c := <-p.done:
					s.finish(c)
				default:
					more = false
				}
			}
		case now := <-sweep.C:
			s.sweep(now)
		case <-retry.C:
		}
		if s.busy() {
			idle.Reset(peerIdle * n.cfg.NodeTimeout)
		}
		next := s.due(time.Now())
		s.fill()
		if l := s.nextLinger(); !l.IsZero() && (next.IsZero() || l.Before(next)) {
			next = l
		}
		if !next.IsZero() {
			retry.Reset(time.Until(next))
		}
	}
}

// forgetIdle forgets p if nothing waits for it; it reports whether it did.
func (n *Node) forgetIdle(p *peer) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	p.mu.Lock()
	empty := len(p.out) == 0 && len(p.queue) == 0
	p.mu.Unlock()
	if !empty {
		return false
	}
	if n.peers[p.addr] == p {
		delete(n.peers, p.addr)
	}
	return true
}
