package lock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Node loss: a node watches the nodes whose holders hold locks or wait
// here, by a Ping every NodeTimeout/8. A node that has neither answered
// nor called here (a lock request, or a Ping of its own) for NodeTimeout
// (heard.go), or that answers with a new incarnation (it restarted), is
// lost: the locks its holders hold here are dropped and their queued
// requests end. Its holders learned it sooner, from their leases
// (lease.go). The transport's own heartbeat fails a frozen peer's lanes
// within its heartbeat timeout, so NodeTimeout should be at least that.

// PingArgs asks a node for its incarnation.
type PingArgs struct {
	From string
	// Check lists holders of the node asked whose proxies the asking
	// node made since its last Ping there: a request can arrive after
	// its holder closed and its tombstone expired.
	Check []OwnerID
}

// PingReply carries the incarnation of the node that answered; 0 means
// that node was closed.
type PingReply struct {
	Incarnation uint64
	// Gone are the holders of PingArgs.Check that are not open here: the
	// asking node drops their proxies.
	Gone []OwnerID
}

// Ping answers with this node's incarnation, or 0 once the node is
// closed: its holders are gone, and the other nodes drop what they held.
func (s *Service) Ping(ctx context.Context, a *PingArgs, r *PingReply) error {
	n := s.n
	if n.isClosed() {
		r.Incarnation = 0
		return nil
	}
	// A node that pings is alive: its holders' leases here rest on it
	// (heard.go).
	n.heardFrom(a.From)
	r.Incarnation = n.inc
	if len(a.Check) > 0 {
		n.mu.RLock()
		for _, id := range a.Check {
			if id.Node == n.inc && n.holders[id] == nil {
				r.Gone = append(r.Gone, id)
			}
		}
		n.mu.RUnlock()
	}
	return nil
}

// takeUnchecked returns the proxies of origin's holders made since the
// last Ping there, and forgets them.
func (n *Node) takeUnchecked(origin string) []OwnerID {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := n.unchecked[origin]
	delete(n.unchecked, origin)
	return ids
}

// pruneUnchecked forgets the proxies to check of nodes that have no
// proxies here any more (all dropped: nothing to ask).
func (n *Node) pruneUnchecked(origins []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for addr := range n.unchecked {
		if !slices.Contains(origins, addr) {
			delete(n.unchecked, addr)
		}
	}
}

// recheck puts ids back for the next Ping to origin.
func (n *Node) recheck(origin string, ids []OwnerID) {
	if len(ids) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unchecked == nil {
		n.unchecked = make(map[string][]OwnerID)
	}
	n.unchecked[origin] = append(n.unchecked[origin], ids...)
}

// dropGone drops the proxies of holders their node says are gone.
func (n *Node) dropGone(ids []OwnerID) {
	for _, id := range ids {
		n.mu.RLock()
		o := n.proxies[id]
		n.mu.RUnlock()
		if o != nil {
			o.drop(n.table)
			n.forget(o)
		}
	}
}

// watchPeers runs until the node closes. Each round pings the nodes
// whose holders hold locks here (the origins) and the nodes this node's
// holders hold leases on (lease.go), one Ping to a node that is both.
func (n *Node) watchPeers() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.NodeTimeout / 8)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		n.sweepEarlyAnswers(time.Now())
		origins := n.origins()
		n.pruneUnchecked(origins)
		targets := n.leaseTargets(origins)
		var wg sync.WaitGroup
		for _, addr := range targets {
			wg.Add(1)
			go func(addr string, origin bool) {
				defer wg.Done()
				n.pingPeer(addr, origin)
			}(addr, slices.Contains(origins, addr))
		}
		wg.Wait()
	}
}

// pingPeer pings addr once: for an origin, to learn whether it is still
// there (and drop its holders' locks when it has been quiet for
// NodeTimeout); for a node this node's holders hold a lease on, to renew
// it.
func (n *Node) pingPeer(addr string, origin bool) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NodeTimeout/4)
	defer cancel()
	var rep PingReply
	var check []OwnerID
	if origin {
		check = n.takeUnchecked(addr)
	}
	sent := mono()
	err := n.cfg.Transport.Call(ctx, addr, ServicePath, "Ping", &PingArgs{From: n.cfg.Addr, Check: check}, &rep)
	if n.ctx.Err() != nil {
		return
	}
	if err == nil {
		if l := n.leaseOf(addr); l != nil {
			l.pinged(sent, rep.Incarnation)
		}
	}
	if !origin {
		return
	}
	if err == nil {
		n.heardFrom(addr)
		n.dropOrigin(addr, rep.Incarnation)
		n.dropGone(rep.Gone)
		return
	}
	// Asked again at the next Ping (a proxy dropped meanwhile is skipped
	// there).
	n.recheck(addr, check)
	n.mu.RLock()
	l := n.live[addr]
	n.mu.RUnlock()
	if l != nil && l.quietFor(mono()) > n.cfg.NodeTimeout {
		n.dropQuiet(addr)
	}
}
