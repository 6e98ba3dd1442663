package lock

import (
	"context"
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
}

// PingReply carries the incarnation of the node that answered; 0 means
// that node was closed.
type PingReply struct {
	Incarnation uint64
}

// Ping answers with this node's incarnation, or 0 once the node is
// closed: its holders are gone, and the other nodes drop what they held.
func (s *Service) Ping(ctx context.Context, a *PingArgs, r *PingReply) error {
	if s.n.isClosed() {
		r.Incarnation = 0
		return nil
	}
	r.Incarnation = s.n.inc
	return nil
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
			if _, ok := origins[a]; !ok {
				delete(watches, a)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for addr := range origins {
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
				err := n.cfg.Transport.Call(ctx, addr, ServicePath, "Ping", &PingArgs{From: n.cfg.Addr}, &rep)
				cancel()
				if n.ctx.Err() != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					w.lastOK = time.Now()
					n.dropOrigin(addr, rep.Incarnation)
					return
				}
				if time.Since(w.lastOK) > n.cfg.NodeTimeout {
					n.dropOrigin(addr, 0)
				}
			}(addr, w)
		}
		wg.Wait()
	}
}

// origins returns the addresses of the nodes with holders here.
func (n *Node) origins() map[string]struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]struct{})
	for _, o := range n.proxies {
		if o.origin != "" && !o.closed.Load() {
			out[o.origin] = struct{}{}
		}
	}
	return out
}

// dropOrigin drops the proxies of origin's holders: all of them when
// alive is 0 (the node is lost), else those of other incarnations.
func (n *Node) dropOrigin(origin string, alive uint64) {
	var lost []*owner
	n.mu.Lock()
	for id, o := range n.proxies {
		if o.origin == origin && (alive == 0 || o.originInc != alive) {
			lost = append(lost, o)
			delete(n.proxies, id)
			n.buryLocked(id, 0, true)
		}
	}
	n.mu.Unlock()
	for _, o := range lost {
		o.drop(n.table)
	}
	if len(lost) > 0 {
		n.lostHolders.Add(int64(len(lost)))
	}
}
