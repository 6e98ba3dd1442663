package lock

// Holds on other nodes that are released already (issue 15). A holder's
// release of a key it holds on another node is immediate on its own
// node, and reaches the other node later: it lingers (Config.
// ReleaseLinger) to ride the holder's next request there, or is on its
// way. Meanwhile that node still shows the hold, and a request there
// waits for it. That wait ends by itself, when the release arrives, so a
// deadlock walk must not count it as an edge: the walk that reaches a
// holder through a hold on another node asks the holder's node
// (ProbeArgs.Held), which knows what the holder holds there now, and the
// branch ends there when the holder holds it no more. The same goes for
// what a failed request took there (its Abort is on its way).
//
// The walk reads the holder's view while the holder's request runs, so
// the view has a mutex of its own (Holder.viewMu), not the request mutex:
// the holder takes both to change it, the walk only viewMu.

// holdsOn reports whether h holds key on node nd by its own account, for
// a hold there that its request last asked for: one of its holds there,
// or a grant of its request in progress (last later than the last
// request that ended).
func (h *Holder) holdsOn(nd, key string, last uint64) bool {
	h.viewMu.Lock()
	defer h.viewMu.Unlock()
	if last > h.ended {
		return true
	}
	rh := h.remoteOf(nd)
	if rh == nil {
		return false
	}
	_, ok := rh.keys[key]
	return ok
}

// holdSeq returns the request of remote holder b (its proxy here) that
// last asked for key, when b holds key here; 0 when it does not (it is
// queued for it, or let it go meanwhile). A holder never queues for a key
// it holds, so a blocker with a hold blocks by that hold.
func holdSeq(b *owner, key string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if hk, ok := b.held[key]; ok {
		return hk.last
	}
	return 0
}

// releasedOn reports whether p reached x, a holder of this node, through
// a hold that x does not hold any more (p.Held on the node and key of
// the last request on p's path): the wait for it ends by itself.
func (n *Node) releasedOn(p *ProbeArgs, x OwnerID) bool {
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
	return !h.holdsOn(last.Node, last.Key, p.Held)
}
