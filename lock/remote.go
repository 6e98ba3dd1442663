package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// remoteHolds is what a holder holds on one other node.
type remoteHolds struct {
	keys map[string]struct{}
	sent uint64 // the last request sent there
	// released lists the keys released there since the last request.
	released []string
}

// peer is another node this node talks to.
type peer struct {
	addr string
}

func (n *Node) notePeer(addr string) {
	if addr == "" || addr == n.cfg.Addr {
		return
	}
	n.mu.Lock()
	if _, ok := n.peers[addr]; !ok && !n.closed {
		n.peers[addr] = &peer{addr: addr}
	}
	n.mu.Unlock()
}

func (n *Node) peerAddrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.peers))
	for a := range n.peers {
		out = append(out, a)
	}
	return out
}

// holdsAnywhere reports whether h holds anything on any node. h.mu is held.
func (h *Holder) holdsAnywhere() bool {
	return h.o.holdsAny() || h.holdsRemote()
}

// holdsRemote reports whether h holds anything on another node. h.mu is
// held.
func (h *Holder) holdsRemote() bool {
	for _, rh := range h.remote {
		if len(rh.keys) > 0 {
			return true
		}
	}
	return false
}

// LockOn takes keys in mode on every node of nodes (addresses; this node's
// own Addr means here), all or nothing: every node is asked at once, the
// nodes that granted are held while the rest answer, and if any node fails
// the request is withdrawn everywhere and the holder keeps what it held
// before. The first failure is returned: ErrDeadlock or ErrProbeLimit from
// a node's deadlock walk, ctx's error, or ErrNodeLost for a node that
// could not be reached.
func (h *Holder) LockOn(ctx context.Context, nodes []string, mode Mode, keys ...string) error {
	if err := checkRequest(mode, keys); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("%w: no nodes", ErrBadRequest)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	seq := h.seq
	local := false
	remotes := make([]string, 0, len(nodes))
	for _, nd := range nodes {
		if nd == h.n.cfg.Addr || nd == "" {
			local = true
		} else if !contains(remotes, nd) {
			remotes = append(remotes, nd)
		}
	}
	if len(remotes) == 0 {
		err := h.lockLocal(ctx, mode, keys, seq)
		if err == nil {
			h.lastOK = seq
		}
		return err
	}
	if h.n.cfg.Transport == nil {
		return fmt.Errorf("%w: this node has no Transport to reach %v", ErrBadRequest, remotes)
	}
	h.o.mu.Lock()
	closed := h.o.closed
	h.o.mu.Unlock()
	if closed {
		return ErrClosed
	}
	holds := h.holdsAnywhere()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		node string
		err  error
	}
	results := make(chan result, len(remotes)+1)
	if h.remote == nil {
		h.remote = make(map[string]*remoteHolds)
	}
	for _, nd := range remotes {
		rh := h.remote[nd]
		if rh == nil {
			rh = &remoteHolds{keys: make(map[string]struct{})}
			h.remote[nd] = rh
		}
		rh.sent = seq
		h.n.notePeer(nd)
		// released is repeated until a request there succeeds: a failed
		// one may have been refused before it applied it.
		args := &AcquireArgs{Owner: h.o.id, Age: h.o.age, Origin: h.n.cfg.Addr, OriginInc: h.n.inc, Seq: seq, LastOK: h.lastOK, Mode: mode, Keys: keys, Holds: holds, Released: rh.released}
		go func(nd string) {
			var rep AcquireReply
			err := h.n.cfg.Transport.Call(rctx, nd, ServicePath, "Acquire", args, &rep)
			if err == nil {
				err = rep.err(nd)
			} else if rctx.Err() == nil {
				err = fmt.Errorf("%w: %s: %v", ErrNodeLost, nd, err)
			}
			results <- result{nd, err}
		}(nd)
	}
	if local {
		go func() {
			results <- result{h.n.cfg.Addr, h.o.take(rctx, h.n, keys, mode, seq, holds)}
		}()
	}
	var first error
	want := len(remotes)
	if local {
		want++
	}
	dead := h.o.done
	// A request on several nodes that is granted on some while it waits on
	// others can close a cycle without holding anything before: at the
	// first grant, the nodes still waiting are told, and walk.
	pending := make(map[string]bool, want)
	for _, nd := range remotes {
		pending[nd] = true
	}
	if local {
		pending[h.n.cfg.Addr] = true
	}
	told := holds
	for i := 0; i < want; i++ {
		var r result
		select {
		case r = <-results:
			delete(pending, r.node)
			if r.err == nil && !told && len(pending) > 0 {
				told = true
				for nd := range pending {
					if nd == h.n.cfg.Addr {
						h.n.holdingElsewhere(h.o, seq)
					} else {
						_ = h.n.cfg.Transport.Cast(rctx, nd, ServicePath, "Holding", &HoldingArgs{Owner: h.o.id, Seq: seq})
					}
				}
			}
		case <-dead:
			// The holder was closed while the request waited: withdraw.
			dead = nil
			cancel()
			if first == nil {
				first = ErrClosed
			}
			i--
			continue
		}
		if r.err != nil && first == nil {
			first = r.err
			if errors.Is(first, context.Canceled) || errors.Is(first, context.DeadlineExceeded) {
				if ctx.Err() != nil {
					first = ctx.Err()
				}
			}
			// Withdraw the rest at once: the ones still waiting return.
			cancel()
		}
	}
	if first != nil {
		if local {
			h.o.releaseGrant(h.n.table, seq)
		}
		for _, nd := range remotes {
			h.n.goSend(nd, "Abort", &AbortArgs{Owner: h.o.id, Seq: seq})
		}
		return fmt.Errorf("lock %d keys %s on %d nodes: %w", len(keys), mode, len(nodes), first)
	}
	for _, nd := range remotes {
		rh := h.remote[nd]
		for _, k := range keys {
			rh.keys[k] = struct{}{}
		}
		rh.released = nil
	}
	h.lastOK = seq
	return nil
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// releaseRemote gives back keys (all when keys is nil) on the other nodes.
// h.mu is held.
func (h *Holder) releaseRemote(keys []string) {
	for nd, rh := range h.remote {
		var mine []string
		if keys == nil {
			if len(rh.keys) == 0 {
				continue
			}
			for k := range rh.keys {
				rh.released = append(rh.released, k)
			}
			clear(rh.keys)
			h.n.goSend(nd, "Release", &ReleaseArgs{Owner: h.o.id, Seq: h.seq, All: true})
			continue
		}
		for _, k := range keys {
			if _, ok := rh.keys[k]; ok {
				mine = append(mine, k)
				delete(rh.keys, k)
				rh.released = append(rh.released, k)
			}
		}
		if len(mine) > 0 {
			h.n.goSend(nd, "Release", &ReleaseArgs{Owner: h.o.id, Keys: mine, Seq: h.seq})
		}
	}
}

// dropRemote ends the holder on every other node it ever asked. h.mu is
// held.
func (h *Holder) dropRemote() {
	for nd, rh := range h.remote {
		h.n.goSend(nd, "Drop", &DropArgs{Owner: h.o.id, LastSeq: rh.sent})
	}
	h.remote = nil
}

// goSend delivers a one-way message (Release, Abort, Drop) to node addr in
// the background, retrying until it is acknowledged, the node is closed or
// NodeTimeout has passed since the first try: the other node drops the
// locks of a node it cannot reach for that long by itself.
func (n *Node) goSend(addr, method string, args any) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		giveUp := time.Now().Add(30 * time.Second)
		backoff := 10 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NodeTimeout)
			err := n.cfg.Transport.Call(ctx, addr, ServicePath, method, args, &Ack{})
			cancel()
			if err == nil || n.ctx.Err() != nil || time.Now().After(giveUp) {
				return
			}
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 500*time.Millisecond)
		}
	}()
}
