package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// remoteHolds is what a holder holds on one other node.
type remoteHolds struct {
	node string // the node's address
	keys keySet
	sent uint64 // the last request sent there
	// ok is the last request there that succeeded: every request sent
	// there after it failed (AcquireArgs.LastOK).
	ok uint64
	// released lists the keys released there since the last request.
	released []string
	// box holds the releases not sent yet (nil: none made so far): the
	// next request there carries released and empties it.
	box *relBox

	// Storage for the above, made with remoteHolds in one allocation
	// rather than five (a holder's first request to a node): released's
	// and a box's first key, and the box itself (box points at it once
	// made). A holder's first call's arguments come with them (call).
	released0 [1]string
	boxMem    relBox
	call      acquireCall

	// lease is this node's lease on node (lease.go), and epoch the
	// lease's epoch when the request in progress there was granted.
	lease *lease
	epoch uint64
	// token is the fencing token of the holder's last request granted
	// there (Holder.Token).
	token uint64
}

// newRemoteHolds returns what a holder holds on node nd, nothing yet.
func newRemoteHolds(nd string) *remoteHolds {
	rh := &remoteHolds{node: nd}
	rh.released = rh.released0[:0]
	return rh
}

// makeBox returns rh's box, made on first use for holder owner.
func (rh *remoteHolds) makeBox(owner OwnerID) *relBox {
	if rh.box == nil {
		rh.box = &rh.boxMem
		rh.box.init(owner)
	}
	return rh.box
}

// remoteOf returns what h holds on node nd (nil: it never asked nd). A
// holder asks a few nodes: a list, searched, costs less than a map. h.mu
// is held.
func (h *Holder) remoteOf(nd string) *remoteHolds {
	for _, rh := range h.remote {
		if rh.node == nd {
			return rh
		}
	}
	return nil
}

// carried empties the box: a request carrying released is about to go.
// If it fails before it applied them, LockOn puts them back (resend).
func (rh *remoteHolds) carried() {
	if rh.box != nil {
		rh.box.carried()
	}
}

// setWaitingOn records the other nodes o's request seq, in progress,
// waits on. They are copied (into a buffer of o's own for up to two), so
// that the caller's list does not escape.
func (o *owner) setWaitingOn(nodes []string, seq uint64) {
	o.mu.Lock()
	clear(o.waitingOn)
	if len(nodes) <= len(o.waitBuf) {
		o.waitingOn = append(o.waitBuf[:0], nodes...)
	} else {
		o.waitingOn = slices.Clone(nodes)
	}
	o.waitSeq = seq
	o.mu.Unlock()
}

// whereWaits returns the other nodes o's request in progress waits on (a
// copy, since the list is the caller's own while its request runs) and
// that request's seq.
func (o *owner) whereWaits() ([]string, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.waitingOn), o.waitSeq
}

// holdsAnywhere reports whether h holds anything on any node. h.mu is held.
func (h *Holder) holdsAnywhere() bool {
	return h.o.holdsAny() || h.holdsRemote()
}

// holdsRemote reports whether h holds anything on another node. h.mu is
// held.
func (h *Holder) holdsRemote() bool {
	for _, rh := range h.remote {
		if rh.keys.len() > 0 {
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

// target is one node a request asks: this node (call nil) or another.
// The keys go beside it (see request).
type target struct {
	nd    string
	rh    *remoteHolds
	call  *acquireCall
	mode  Mode
	seq   uint64
	holds bool
}

// ask asks nodes at once and waits for all of their answers; it returns
// the first failure, after which it has withdrawn the rest (the request
// context's cancel). A node that granted is held while the others answer.
// ctx is the caller's, rctx the request's own. With several nodes at once,
// r.holds is set (ask runs them after the first node granted), so a node
// that makes the request wait walks for deadlocks at once.
func (r *request) ask(ctx, rctx context.Context, nodes, keys []string) error {
	if !(len(nodes) == 1 && nodes[0] == r.h.n.cfg.Addr) {
		// Where a deadlock walk that reaches the holder goes on to: the
		// other nodes expand its requests queued there only when it
		// comes from here (ProbeArgs.Since). Also when it held nothing
		// before: what the request takes on a node is held there while
		// it waits for its next key. A wait on this node is found in
		// its table, not here.
		r.h.o.setWaitingOn(nodes, r.seq)
		defer r.h.o.setWaitingOn(nil, 0)
	}
	if len(nodes) == 1 {
		// One node (always the first one, and the second of two): no
		// goroutine, no channel.
		t := r.prepare(nodes[0], keys)
		err := r.h.askNode(rctx, t, keys, r.h.ans)
		if t.call != nil && t.call.replied {
			r.h.spare = t.call
		}
		return r.verdict(ctx, err)
	}
	return r.askMany(ctx, rctx, nodes, keys)
}

// askMany is ask for several nodes at once: a goroutine each.
func (r *request) askMany(ctx, rctx context.Context, nodes, keys []string) error {
	results := make(chan error, len(nodes))
	h := r.h
	// The goroutines' own copy: the caller's keys stay on its side.
	own := slices.Clone(keys)
	for _, nd := range nodes {
		t := r.prepare(nd, keys)
		go func() { results <- h.askNode(rctx, t, own, nil) }()
	}
	var first error
	for range nodes {
		err := <-results
		if err != nil && first == nil {
			first = err
			// Withdraw the rest at once: the ones still waiting return.
			h.rq.cancel()
		}
	}
	return r.verdict(ctx, first)
}

// prepare notes that node nd is asked and returns what asks it. The ask
// may run on another goroutine; prepare may not.
func (r *request) prepare(nd string, keys []string) target {
	h := r.h
	t := target{nd: nd, mode: r.mode, seq: r.seq, holds: r.holds}
	if nd == h.n.cfg.Addr {
		r.local = true
		return t
	}
	rh := h.remoteOf(nd)
	if rh == nil {
		rh = newRemoteHolds(nd)
		h.viewMu.Lock()
		if h.remote == nil {
			h.remote = h.remoteBuf[:0]
		}
		h.remote = append(h.remote, rh)
		h.viewMu.Unlock()
		if h.spare == nil {
			// The holder's first call: its arguments came with rh.
			h.spare = &rh.call
		}
		rh.lease = h.n.leaseFor(nd)
	}
	t.rh = rh
	rh.sent = r.seq
	rh.carried()
	r.asked = append(r.asked, nd)
	c := h.spare
	h.spare = nil
	if c == nil {
		c = new(acquireCall)
	}
	if c.keys == nil {
		c.keys = c.keys0[:0]
	}
	// released is repeated until a request there succeeds: a failed one
	// may have been refused before it applied it.
	// The keys are copied: the caller's list (often the variadic one of a
	// single key) then stays on its stack.
	c.keys = append(c.keys[:0], keys...)
	c.args = AcquireArgs{Owner: h.o.id, Age: h.o.age, Origin: h.n.cfg.Addr, OriginInc: h.n.inc, Seq: r.seq, LastOK: rh.ok, Mode: r.mode, Keys: c.keys, Holds: r.holds, Released: rh.released}
	if len(rh.released) > 0 && rh.keys.len() == 0 {
		// It holds nothing there any more: "all", not the list.
		c.args.Released, c.args.ReleasedAll = nil, true
	}
	c.rep, c.replied = AcquireReply{}, false
	t.call = c
	return t
}

// acquireCall is the arguments and reply of one Acquire call. Once the
// call got its reply the transport is done with both, and the holder's
// next request reuses them; a call that failed may still be read or
// written by the transport, and is left to the garbage collector.
type acquireCall struct {
	args    AcquireArgs
	rep     AcquireReply
	replied bool
	keys    []string // args.Keys, kept for the next request
	keys0   [1]string
}

// askNode asks t's node and waits for its answer. ch receives the
// Answer of a request that waits there: the holder's own channel when
// it asks one node at a time, nil for one of its own.
func (h *Holder) askNode(rctx context.Context, t target, keys []string, ch chan verdict) error {
	if t.call == nil {
		err := h.o.takeLocal(rctx, h.n, keys, t.mode, t.seq, t.holds)
		if err == nil {
			h.localToken = 0
		}
		return err
	}
	nd := t.nd
	rep := &t.call.rep
	sent := mono()
	err := h.n.cfg.Transport.Call(rctx, nd, ServicePath, "Acquire", &t.call.args, rep)
	t.call.replied = err == nil
	var inLease bool
	if err == nil {
		// Any answer renews the lease there (lease.go).
		t.rh.epoch, inLease = t.rh.lease.answered(sent)
	}
	if err == nil && rep.Code == codeQueued {
		if err = h.awaitQueued(rctx, t, ch); err != nil {
			return err
		}
		t.rh.epoch, inLease = t.rh.lease.valid()
	}
	if err == nil {
		if rep.Code == codeOK {
			if !inLease {
				return leaseErr(nd)
			}
			// Taken while the holder holds what it held there before:
			// good for those keys too (token.go).
			t.rh.token = rep.Token
			return nil
		}
		return rep.err(nd)
	}
	if rctx.Err() == nil {
		return nodeLostErr(nd, err)
	}
	return err
}

// awaitQueued waits for the verdict of t's request, queued on its node,
// into t.call.rep; an error is the wait's own (the request's context
// ended, or the node was lost). Apart from askNode, whose frame stays
// small for the usual call answered at once (see lockOnErr).
//
//go:noinline
func (h *Holder) awaitQueued(rctx context.Context, t target, ch chan verdict) error {
	rep := &t.call.rep
	// An Answer that overtook the reply waits in the early table.
	k := answerKey{h.o.id, t.seq, t.nd}
	ch, v, ok := h.n.expectAnswer(k, ch)
	if ok {
		rep.Code, rep.Token = v.code, v.token
		return nil
	}
	var err error
	*rep, err = h.n.awaitAnswer(rctx, h.o.id, t.seq, t.nd, ch)
	h.n.forgetAnswer(k)
	return err
}

//go:noinline
func nodeLostErr(nd string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrNodeLost, nd, err)
}

// verdict is the error a request ends with: ErrClosed when its holder was
// closed meanwhile, the caller's own context error when that ended it.
func (r *request) verdict(ctx context.Context, err error) error {
	return r.h.verdict(ctx, err)
}

// verdict is the error a request of h's that failed with err ends with,
// under the caller's ctx: ErrClosed when h was closed meanwhile, the
// cause h was lost with, the caller's own context error when that ended
// it, err otherwise.
func (h *Holder) verdict(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if h.life.Err() != nil {
		return ErrClosed
	}
	if lost := h.lostErr(); lost != nil {
		return lost
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
