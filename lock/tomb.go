package lock

import "time"

// A holder of another node that was dropped here (Drop), or whose request
// was withdrawn before any of its requests arrived (Abort), leaves a
// tombstone instead of a proxy: late requests up to its seq are refused,
// and it expires after 2×NodeTimeout (a request that late is past any
// sensible deadline), so this node keeps nothing for gone holders.

// tomb is what a node remembers of a gone or unknown holder.
type tomb struct {
	seq     uint64 // requests up to seq are refused
	closed  bool   // the holder was dropped: every request is refused
	expires time.Time
}

// bury records a tombstone for id, merged with the one already there. n.mu
// is held.
func (n *Node) buryLocked(id OwnerID, seq uint64, closed bool) {
	now := time.Now()
	if now.After(n.nextSweep) {
		for k, t := range n.tombs {
			if now.After(t.expires) {
				delete(n.tombs, k)
			}
		}
		n.nextSweep = now.Add(n.cfg.NodeTimeout)
	}
	t := n.tombs[id]
	t.seq = max(t.seq, seq)
	t.closed = t.closed || closed
	t.expires = now.Add(2 * n.cfg.NodeTimeout)
	n.tombs[id] = t
}

// refusedLocked reports whether request seq of holder id is refused by a
// tombstone, and returns the seq a new proxy starts with as aborted. n.mu
// is held.
func (n *Node) refusedLocked(id OwnerID, seq uint64) (bool, uint64) {
	t, ok := n.tombs[id]
	if !ok || time.Now().After(t.expires) {
		return false, 0
	}
	return t.closed || seq <= t.seq, t.seq
}
