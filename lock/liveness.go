package lock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Node loss: a node watches the nodes whose holders hold locks or wait
// here, by a Ping every NodeTimeout/8. A node that has not answered for
// NodeTimeout, or that answers with a new incarnation (it restarted), is
// lost: the locks its holders hold here are dropped and their queued
// requests end. The transport's own heartbeat fails a frozen peer's lanes
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

// watch is the liveness state of one origin node.
type watch struct {
	lastOK time.Time
}

// watchPeers runs until the node closes.
func (n *Node) watchPeers() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.NodeTimeout / 8)
	defer tick.Stop()
	watches := make(map[string]*watch)
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		n.sweepEarlyAnswers(time.Now())
		origins := n.origins()
		for a := range watches {
			if !slices.Contains(origins, a) {
				delete(watches, a)
			}
		}
		n.pruneUnchecked(origins)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, addr := range origins {
			w := watches[addr]
			if w == nil {
				w = &watch{lastOK: time.Now()}
				watches[addr] = w
			}
			wg.Add(1)
			go func(addr string, w *watch) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NodeTimeout/4)
				var rep PingReply
				check := n.takeUnchecked(addr)
				err := n.cfg.Transport.Call(ctx, addr, ServicePath, "Ping", &PingArgs{From: n.cfg.Addr, Check: check}, &rep)
				cancel()
				if n.ctx.Err() != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					w.lastOK = time.Now()
					n.dropOrigin(addr, rep.Incarnation)
					n.dropGone(rep.Gone)
					return
				}
				// Asked again at the next Ping (a proxy dropped meanwhile
				// is skipped there).
				n.recheck(addr, check)
				if time.Since(w.lastOK) > n.cfg.NodeTimeout {
					n.dropOrigin(addr, 0)
				}
			}(addr, w)
		}
		wg.Wait()
	}
}
