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
			if !slices.Contains(origins, a) {
				delete(watches, a)
			}
		}
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
