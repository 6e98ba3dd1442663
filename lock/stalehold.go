package lock

// Edges of a deadlock walk that end by themselves. A holder's release of a
// key it holds on another node is immediate on its own node and reaches
// the other node later (it lingers, Config.ReleaseLinger, or is on its
// way); meanwhile a request there waits for the hold, a wait that ends by
// itself and so is no edge. Likewise what a failed request of the holder's
// took there, until its Abort arrives. So the walk that reaches a holder
// of another node asks the holder's node (ProbeArgs.Held), which knows
// what the holder holds there now and which of its requests still runs,
// and the branch ends there when the edge is gone by the holder's account.
//
// The walk reads that account while the holder's request runs, so it has a
// mutex of its own (Holder.viewMu): the holder takes both to change it,
// the walk only viewMu.

// mayBlockOn reports whether h, by its own account, may still block a
// request for key on node nd by what its request seq (or an earlier one)
// did there: seq is its request in progress (later than the last request
// that ended), or h holds key there.
func (h *Holder) mayBlockOn(nd, key string, seq uint64) bool {
	h.viewMu.Lock()
	defer h.viewMu.Unlock()
	if seq > h.ended {
		return true
	}
	rh := h.remoteOf(nd)
	if rh == nil {
		return false
	}
	return rh.keys.has(key)
}

// requestOn reports whether h's request seq has not ended, by h's own
// account: it is the request in progress.
func (h *Holder) requestOn(seq uint64) bool {
	h.viewMu.Lock()
	defer h.viewMu.Unlock()
	return seq > h.ended
}

// blockSeq returns, for b, the proxy here of another node's holder that
// blocks a request for key, the latest of b's requests the block can be
// owed to: the one that last asked for key when b holds it, else (b is
// queued for it, or the key is changing hands: a grant not recorded yet,
// a release under way) the latest of b's requests that reached this node.
func blockSeq(b *owner, key string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if hk, ok := b.held.get(key); ok {
		return hk.last
	}
	return b.maxSeq
}

// goneEdge reports whether p reached x, a holder of this node, by an edge
// that x's own account says is gone (p.Held, on the node and key of the
// last request on p's path): the wait it stands for ends by itself.
func (n *Node) goneEdge(p *ProbeArgs, x OwnerID) bool {
	if p.Held == 0 || x.Node != n.inc || len(p.Path) == 0 {
		return false
	}
	n.mu.RLock()
	h := n.holders[x]
	n.mu.RUnlock()
	if h == nil {
		return false
	}
	last := p.Path[len(p.Path)-1]
	return !h.mayBlockOn(last.Node, last.Key, p.Held)
}
