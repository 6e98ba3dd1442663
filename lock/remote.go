package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// remoteHolds is what a holder holds on one other node.
type remoteHolds struct {
	keys map[string]struct{}
	sent uint64 // the last request sent there
	// ok is the last request there that succeeded: every request sent
	// there after it failed (AcquireArgs.LastOK).
	ok uint64
	// released lists the keys released there since the last request.
	released []string
	// box holds the releases not sent yet (nil: none made so far): the
	// next request there carries released and empties it.
	box *relBox
}

// carried empties the box: a request carrying released is about to go.
// If it fails before it applied them, LockOn puts them back (resend).
func (rh *remoteHolds) carried() {
	if rh.box != nil {
		rh.box.carried()
	}
}

// setWaitingOn records the other nodes o's request in progress waits on.
func (o *owner) setWaitingOn(nodes []string) {
	o.mu.Lock()
	o.waitingOn = nodes
	o.mu.Unlock()
}

// whereWaits returns the other nodes o's request in progress waits on: a
// copy, since the list is the caller's own while its request runs.
func (o *owner) whereWaits() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.waitingOn)
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
// own Addr means here), all or nothing. The nodes are asked in one order
// that every holder of the cluster uses (sorted by address): the first
// node alone, then, once it granted, the rest at once. So a request waits
// on the first node holding nothing, and two requests for the same keys
// cannot each be granted on one node and wait on the other. The nodes that
// granted are held while the rest answer, and if any node fails the
// request is withdrawn everywhere and the holder keeps what it held
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
	order := nodeOrder(nodes, h.n.cfg.Addr)
	if len(order) == 1 && order[0] == h.n.cfg.Addr {
		return h.lockLocal(ctx, mode, keys, seq)
	}
	if h.n.cfg.Transport == nil || h.n.cfg.Server == nil {
		// The other nodes answer a waiting request, and watch this node's
		// holders, through this node's lock service.
		return fmt.Errorf("%w: locks on other nodes (%v) need this node's Server, Addr and Transport", ErrConfig, order)
	}
	h.o.mu.Lock()
	closed := h.o.closed.Load()
	h.o.mu.Unlock()
	if closed || h.n.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		// Not sent: a transport may still deliver a call whose context
		// ended as it was made, and the other node would grant it.
		return fmt.Errorf("lock %d keys %s on %d nodes: %w", len(keys), mode, len(nodes), err)
	}
	if h.remote == nil {
		h.remote = make(map[string]*remoteHolds)
	}
	r := request{h: h, seq: seq, mode: mode, keys: keys, holds: h.holdsAnywhere()}
	r.asked = r.askedBuf[:0]
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close ends the request wherever it waits.
	if !h.withdrawOnClose(cancel) {
		return ErrClosed
	}
	defer h.withdrawOnClose(nil)
	err := r.ask(ctx, rctx, cancel, order[:1])
	if err == nil && len(order) > 1 {
		// Granted on the first node: from here the holder holds something,
		// so the rest walk for deadlocks as soon as they must wait.
		r.holds = true
		err = r.ask(ctx, rctx, cancel, order[1:])
	}
	if err != nil {
		if r.local {
			h.o.releaseGrant(h.n.table, seq)
		}
		for _, nd := range r.asked {
			h.abortRemote(nd, seq)
			h.resend(nd, seq)
		}
		return fmt.Errorf("lock %d keys %s on %d nodes: %w", len(keys), mode, len(nodes), err)
	}
	for _, nd := range r.asked {
		rh := h.remote[nd]
		for _, k := range keys {
			rh.keys[k] = struct{}{}
		}
		rh.released = nil
		rh.ok = seq
	}
	return nil
}

// nodeOrder returns nodes without duplicates, "" read as self, in the
// order every node asks them in: sorted by address. nodes itself, when it
// is that already (a caller that names the same nodes each time): the
// request reads it only while it runs.
func nodeOrder(nodes []string, self string) []string {
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
	out := make([]string, 0, len(nodes))
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

// request is one LockOn in progress. Only its own goroutine uses it.
type request struct {
	h     *Holder
	seq   uint64
	mode  Mode
	keys  []string
	holds bool // the holder holds something somewhere: walk at once

	local    bool     // this node was asked
	asked    []string // the other nodes asked
	askedBuf [2]string
}

// target is one node a request asks: this node (args nil) or another.
type target struct {
	nd    string
	args  *AcquireArgs
	keys  []string
	mode  Mode
	seq   uint64
	holds bool
}

// ask asks nodes at once and waits for all of their answers; it returns
// the first failure, after which it has withdrawn the rest (cancel). A
// node that granted is held while the others answer. ctx is the caller's,
// rctx the request's own (ended by cancel). With several nodes at once,
// r.holds is set (ask runs them after the first node granted), so a node
// that makes the request wait walks for deadlocks at once.
func (r *request) ask(ctx, rctx context.Context, cancel context.CancelFunc, nodes []string) error {
	r.h.o.setWaitingOn(nodes)
	defer r.h.o.setWaitingOn(nil)
	if len(nodes) == 1 {
		// One node (always the first one, and the second of two): no
		// goroutine, no channel.
		return r.verdict(ctx, r.h.askNode(rctx, r.prepare(nodes[0]), r.h.ans))
	}
	results := make(chan error, len(nodes))
	h := r.h
	for _, nd := range nodes {
		t := r.prepare(nd)
		go func() { results <- h.askNode(rctx, t, nil) }()
	}
	var first error
	for range nodes {
		err := <-results
		if err != nil && first == nil {
			first = err
			// Withdraw the rest at once: the ones still waiting return.
			cancel()
		}
	}
	return r.verdict(ctx, first)
}

// prepare notes that node nd is asked and returns what asks it. The ask
// may run on another goroutine; prepare may not.
func (r *request) prepare(nd string) target {
	h := r.h
	t := target{nd: nd, keys: r.keys, mode: r.mode, seq: r.seq, holds: r.holds}
	if nd == h.n.cfg.Addr {
		r.local = true
		return t
	}
	rh := h.remote[nd]
	if rh == nil {
		rh = &remoteHolds{keys: make(map[string]struct{})}
		h.remote[nd] = rh
	}
	rh.sent = r.seq
	rh.carried()
	r.asked = append(r.asked, nd)
	// released is repeated until a request there succeeds: a failed one
	// may have been refused before it applied it.
	t.args = &AcquireArgs{Owner: h.o.id, Age: h.o.age, Origin: h.n.cfg.Addr, OriginInc: h.n.inc, Seq: r.seq, LastOK: rh.ok, Mode: r.mode, Keys: r.keys, Holds: r.holds, Released: rh.released}
	return t
}

// askNode asks t's node and waits for its answer. ch receives the
// Answer of a request that waits there: the holder's own channel when
// it asks one node at a time, nil for one of its own.
func (h *Holder) askNode(rctx context.Context, t target, ch chan int) error {
	if t.args == nil {
		return h.o.takeLocal(rctx, h.n, t.keys, t.mode, t.seq, t.holds)
	}
	nd := t.nd
	var rep AcquireReply
	err := h.n.cfg.Transport.Call(rctx, nd, ServicePath, "Acquire", t.args, &rep)
	if err == nil && rep.Code == codeQueued {
		// An Answer that overtook the reply waits in the early table.
		k := answerKey{h.o.id, t.seq, nd}
		ch, code, ok := h.n.expectAnswer(k, ch)
		if ok {
			rep.Code = code
		} else {
			rep, err = h.n.awaitAnswer(rctx, h.o.id, t.seq, nd, ch)
			h.n.forgetAnswer(k)
			if err != nil && rctx.Err() == nil {
				return err
			}
		}
	}
	if err == nil {
		return rep.err(nd)
	}
	if rctx.Err() == nil {
		return fmt.Errorf("%w: %s: %w", ErrNodeLost, nd, err)
	}
	return err
}

// verdict is the error a request ends with: ErrClosed when its holder was
// closed meanwhile, the caller's own context error when that ended it.
func (r *request) verdict(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if r.h.life.Err() != nil {
		return ErrClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
