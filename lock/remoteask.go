package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

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
