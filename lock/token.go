package lock

import (
	"slices"
	"time"
)

// Fencing tokens. Every request granted on a node gets the next value of
// the node's counter, which starts at the node's start time in ns (Unix)
// and adds one per grant. A grant of a key comes after the release of
// the key by its last holder, which comes after that holder's token was
// taken, so a key's tokens on a node grow from holder to holder; a node
// that restarts starts above every token it gave before as long as it
// gave fewer than one per ns and its clock did not step back across the
// restart. A holder's later grant on a node is taken while it still holds
// its earlier keys there, so its last token is good for all of them. For
// the same reason a local grant's token is taken only when Token asks for
// it, while the holder holds the key: a holder that never asks costs the
// counter nothing.

// newTokens returns the counter's start: the current time in ns.
func newTokens() uint64 { return uint64(time.Now().UnixNano()) }

// nextToken returns the fencing token of a grant made now.
func (n *Node) nextToken() uint64 { return n.tokens.Add(1) }

// Token returns the fencing token of the holder's lock on key, and false
// when it does not hold key. Storage that keeps, per key, the largest
// token it accepted and refuses a write with a smaller one refuses the
// writes of a holder whose lock was taken over (by another holder after
// a lost lease, say): the later holder's token is larger.
//
// Tokens of one node compare; tokens of different nodes do not. For a
// key held on several nodes, Token gives the token of the first of them
// in address order (the order LockOn asks them in), which is the same
// node for every holder that locks the key on the same nodes; TokenOn
// names the node.
func (h *Holder) Token(key string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var best string
	var tok uint64
	found := false
	if h.o.holdsKey(key) {
		best, tok, found = h.n.cfg.Addr, h.ownToken(), true
	}
	for _, rh := range h.remote {
		if rh.keys.has(key) && (!found || rh.node < best) {
			best, tok, found = rh.node, rh.token, true
		}
	}
	return tok, found
}

// TokenOn returns the fencing token of the holder's lock on key on node
// (an address; this node's own Addr or "" means here), and false when it
// does not hold key there.
func (h *Holder) TokenOn(node, key string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if node == "" || node == h.n.cfg.Addr {
		if h.o.holdsKey(key) {
			return h.ownToken(), true
		}
		return 0, false
	}
	i := slices.IndexFunc(h.remote, func(rh *remoteHolds) bool { return rh.node == node })
	if i < 0 || !h.remote[i].keys.has(key) {
		return 0, false
	}
	return h.remote[i].token, true
}

// ownToken returns the token of the holder's last grant on its own node,
// taken now if it was not yet: the holder holds the key asked for. h.mu
// is held.
func (h *Holder) ownToken() uint64 {
	if h.localToken == 0 {
		h.localToken = h.n.nextToken()
	}
	return h.localToken
}

// holdsKey reports whether o holds key on its own node.
func (o *owner) holdsKey(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.held.get(key)
	return ok
}
