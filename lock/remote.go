package lock

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// LockOn takes keys in mode on every node of nodes (addresses; this node's
// own Addr means here), all or nothing. The nodes are asked in one order
// that every holder of the cluster uses (sorted by address): the first
// node alone, then, once it granted, the rest at once. So a request waits
// on the first node holding nothing, and two requests for the same keys
// cannot each be granted on one node and wait on the other. The nodes that
// granted are held while the rest answer, and if any node fails the
// request is withdrawn everywhere and the holder keeps what it held
// before. The first failure is returned: ErrDeadlock or ErrProbeLimit from
// a node's deadlock walk, ErrUpgrade, ctx's error, ErrLockLost, ErrClosed
// for this holder or node closed, or ErrNodeLost for a node that could
// not be reached, was closed or dropped the request. An invalid request
// fails with ErrBadRequest, and one on other nodes from a node without a
// Server or Transport with ErrConfig.
func (h *Holder) LockOn(ctx context.Context, nodes []string, mode Mode, keys ...string) error {
	if err := checkRequest(mode, keys); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("%w: no nodes", ErrBadRequest)
	}
	if err := h.lostErr(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	seq := h.seq
	var orderBuf [2]string
	order := nodeOrder(nodes, h.n.cfg.Addr, orderBuf[:0])
	if len(order) == 1 && order[0] == h.n.cfg.Addr {
		return h.lockLocal(ctx, mode, keys, seq)
	}
	if h.n.cfg.Transport == nil || h.n.cfg.Server == nil {
		// The other nodes answer a waiting request, and watch this node's
		// holders, through this node's lock service.
		return configErr(order)
	}
	if h.o.closed.Load() || h.n.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		// Not sent: a transport may still deliver a call whose context
		// ended as it was made, and the other node would grant it.
		return lockOnErr(len(keys), mode, len(nodes), err)
	}
	// The holder's own buffer: one request at a time.
	r := request{h: h, seq: seq, mode: mode, holds: h.holdsAnywhere(), asked: h.askedBuf[:0]}
	rctx, ok := h.requestCtx(ctx)
	if !ok {
		return ErrClosed
	}
	err := r.ask(ctx, rctx, order[:1], keys)
	if err == nil && len(order) > 1 {
		// Granted on the first node: from here the holder holds something,
		// so the rest walk for deadlocks as soon as they must wait.
		r.holds = true
		err = r.ask(ctx, rctx, order[1:], keys)
	}
	h.viewMu.Lock()
	if err == nil {
		err = r.sameEpochs()
	}
	if err != nil {
		h.viewMu.Unlock()
		r.failed()
		return lockOnErr(len(keys), mode, len(nodes), err)
	}
	for _, nd := range r.asked {
		rh := h.remoteOf(nd)
		for _, k := range keys {
			rh.keys.set(k, struct{}{})
		}
		// The transport is done with the request that carried them (a
		// failed one got a copy).
		clear(rh.released)
		rh.released = rh.released[:0]
		rh.ok = seq
	}
	h.ended = seq
	h.viewMu.Unlock()
	clear(r.asked)
	return nil
}

// sameEpochs reports ErrLockLost when a lease on a node that granted r
// ended since: that node may drop the grant, and the holder, whose keys
// there are not recorded yet, would not be told (Node.loseAt). Under
// viewMu, which loseAt takes after it ends a lease, so that either this
// finds the new epoch or loseAt finds the keys. h.mu is held.
func (r *request) sameEpochs() error {
	for _, nd := range r.asked {
		rh := r.h.remoteOf(nd)
		if rh.lease.epoch.Load() != rh.epoch {
			return leaseErr(nd)
		}
	}
	return nil
}

//go:noinline
func leaseErr(nd string) error {
	return fmt.Errorf("%w: the lease on %s ran out before its grant was taken", ErrLockLost, nd)
}

// failed withdraws request r everywhere it was asked. h.mu is held.
func (r *request) failed() {
	h := r.h
	// The calls still in flight are withdrawn.
	h.endRequestCtx()
	// What it took elsewhere is no hold of the holder's: the Abort below
	// gives it back (stalehold.go).
	h.viewMu.Lock()
	h.ended = r.seq
	h.viewMu.Unlock()
	for _, nd := range r.asked {
		// A call that failed may still be encoded by the transport: its
		// list of releases is its own from here.
		rh := h.remoteOf(nd)
		rh.released = slices.Clone(rh.released)
	}
	if r.local {
		h.o.releaseGrant(h.n.table, r.seq)
	}
	for _, nd := range r.asked {
		h.abortRemote(nd, r.seq)
		h.resend(nd, r.seq)
	}
}

// lockOnErr and configErr make LockOn's errors. Apart, and not inlined:
// their formatting would add to the frame of every LockOn, whose
// goroutine's stack then grows (and, after a collection shrank it, grows
// again) on the way into the transport.
//
//go:noinline
func lockOnErr(keys int, mode Mode, nodes int, err error) error {
	return fmt.Errorf("lock %d keys %s on %d nodes: %w", keys, mode, nodes, err)
}

//go:noinline
func configErr(order []string) error {
	return fmt.Errorf("%w: locks on other nodes (%s) need this node's Server, Addr and Transport", ErrConfig, strings.Join(order, ", "))
}

// nodeOrder returns nodes without duplicates, "" read as self, in the
// order every node asks them in: sorted by address. nodes itself, when it
// is that already (a caller that names the same nodes each time): the
// request reads it only while it runs. Otherwise the list is appended to
// buf (the caller's, on its stack for two nodes).
func nodeOrder(nodes []string, self string, buf []string) []string {
	ordered := true
	for i, nd := range nodes {
		if nd == "" || (i > 0 && nodes[i-1] >= nd) {
			ordered = false
			break
		}
	}
	if ordered {
		return nodes
	}
	if len(nodes) == 2 && nodes[1] != "" && nodes[1] < nodes[0] {
		// Two nodes named the other way round (a node whose address
		// sorts after its peer's, naming itself first): no sort.
		return append(buf[:0], nodes[1], nodes[0])
	}
	out := buf[:0]
	for _, nd := range nodes {
		if nd == "" {
			nd = self
		}
		if !contains(out, nd) {
			out = append(out, nd)
		}
	}
	slices.Sort(out)
	return out
}

// request is one LockOn in progress. Only its own goroutine uses it. Its
// keys are passed beside it: a field would let them escape with h (escape
// analysis does not tell a struct's fields apart), and the caller's list,
// often the variadic one of a single key, stays on its stack.
type request struct {
	h     *Holder
	seq   uint64
	mode  Mode
	holds bool // the holder holds something somewhere: walk at once

	local bool     // this node was asked
	asked []string // the other nodes asked
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
