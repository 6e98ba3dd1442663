package lock

import (
	"context"
	"time"
)

// peerQueue bounds the casts (deadlock probes and verdicts) waiting to go
// to one other node; more are dropped, since every waiting request walks
// again after ProbeInterval anyway.
const peerQueue = 1024

// peerIdle is how many NodeTimeouts a peer's sender stays without work
// before it ends.
const peerIdle = 4

// peer is another node this node talks to. Probes and verdicts go to it
// through its own sender goroutine, so that a deadlock walk never waits on
// the network: a frozen peer delays nothing but its own casts.
type peer struct {
	addr string
	out  chan cast
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
	p := &peer{addr: addr, out: make(chan cast, peerQueue)}
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

// sendTo delivers p's casts until the node closes, or until it had
// nothing to send for peerIdle × NodeTimeout: then p is forgotten, so
// that addresses named once (a dead node, a typo) cost nothing for good.
// Each cast has NodeTimeout to go out.
func (n *Node) sendTo(p *peer) {
	defer n.wg.Done()
	idle := time.NewTimer(peerIdle * n.cfg.NodeTimeout)
	defer idle.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-idle.C:
			n.mu.Lock()
			if len(p.out) == 0 {
				if n.peers[p.addr] == p {
					delete(n.peers, p.addr)
				}
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
			idle.Reset(peerIdle * n.cfg.NodeTimeout)
		case c := <-p.out:
			idle.Reset(peerIdle * n.cfg.NodeTimeout)
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NodeTimeout)
			_ = n.cfg.Transport.Cast(ctx, p.addr, ServicePath, c.method, c.args)
			cancel()
		}
	}
}
