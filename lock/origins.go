package lock

// The proxies of other nodes' holders are indexed by their node and its
// incarnation too, so that the peer watch (liveness.go), every
// NodeTimeout/8, lists the nodes to ping and finds the proxies of a lost
// or restarted node without ranging over every proxy under the node's
// write lock: with 10,000 holders on the other node that scan held back
// every request and release of this node for its duration.

// originIndex is the proxies of each origin node, by its incarnation.
// Guarded by the node's mu.
type originIndex map[string]map[uint64]map[OwnerID]*owner

// addProxyLocked records proxy o. n.mu is held (write).
func (n *Node) addProxyLocked(o *owner) {
	n.proxies[o.id] = o
	if o.origin != "" {
		o.live = n.liveForLocked(o.origin)
	}
	incs := n.byOrigin[o.origin]
	if incs == nil {
		incs = make(map[uint64]map[OwnerID]*owner)
		n.byOrigin[o.origin] = incs
	}
	set := incs[o.originInc]
	if set == nil {
		set = make(map[OwnerID]*owner)
		incs[o.originInc] = set
	}
	set[o.id] = o
}

// removeProxyLocked forgets proxy o, if it is the one recorded. n.mu is
// held (write).
func (n *Node) removeProxyLocked(o *owner) {
	if n.proxies[o.id] != o {
		return
	}
	delete(n.proxies, o.id)
	incs := n.byOrigin[o.origin]
	set := incs[o.originInc]
	delete(set, o.id)
	if len(set) == 0 {
		delete(incs, o.originInc)
		if len(incs) == 0 {
			delete(n.byOrigin, o.origin)
			delete(n.live, o.origin)
		}
	}
}

// origins returns the addresses of the nodes with holders here.
func (n *Node) origins() []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]string, 0, len(n.byOrigin))
	for addr := range n.byOrigin {
		if addr != "" {
			out = append(out, addr)
		}
	}
	return out
}

// dropQuiet drops the proxies of origin's holders when it has not been
// heard for NodeTimeout (heard.go): checked again under the write lock,
// so that a call from origin touched as it was found quiet keeps them.
func (n *Node) dropQuiet(origin string) {
	n.dropOriginIf(origin, 0, true)
}

// dropOrigin drops the proxies of origin's holders: all of them when
// alive is 0 (the node is lost), else those of other incarnations.
func (n *Node) dropOrigin(origin string, alive uint64) {
	n.dropOriginIf(origin, alive, false)
}

func (n *Node) dropOriginIf(origin string, alive uint64, quiet bool) {
	n.mu.RLock()
	incs := n.byOrigin[origin]
	stale := len(incs) > 1 || (len(incs) == 1 && (alive == 0 || incs[alive] == nil))
	n.mu.RUnlock()
	if !stale {
		// The usual tick: the node answered with the incarnation its
		// holders here have.
		return
	}
	var lost []*owner
	n.mu.Lock()
	if l := n.live[origin]; quiet && l != nil && l.quietFor(mono()) <= n.cfg.NodeTimeout {
		n.mu.Unlock()
		return
	}
	for inc, set := range n.byOrigin[origin] {
		if alive != 0 && inc == alive {
			continue
		}
		for _, o := range set {
			lost = append(lost, o)
		}
	}
	for _, o := range lost {
		n.removeProxyLocked(o)
		n.buryLocked(o.id, 0, true)
	}
	n.mu.Unlock()
	for _, o := range lost {
		o.drop(n.table)
	}
	if len(lost) > 0 {
		n.lostHolders.Add(int64(len(lost)))
	}
}
