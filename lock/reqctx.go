package lock

import (
	"context"
	"reflect"
)

// A LockOn to other nodes runs under a context of its own, derived from
// the caller's, which Holder.Close cancels to end the request wherever it
// waits. Making one per request (context.WithCancel: a context, its Done
// channel and an entry in the parent's children) cost three allocations
// and two of the parent's mutex per lock, so a holder keeps it while its
// requests succeed under the same caller context: an actor that locks in
// a loop under one context makes it once. A failed request, a different
// caller context and Close end it.

// reqCtx is a holder's request context and the caller context it derives
// from. Guarded by the holder's mu, except that Close cancels it by
// reqCancel.
type reqCtx struct {
	// parent is the caller's context it derives from; nil when its type
	// is not comparable (== on an interface holding such a value
	// panics), so that such a context is never reused.
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
}

// requestCtx returns the context for a request under the caller's ctx,
// reusing the holder's last one when it derives from the same ctx and has
// not ended. It reports false, having made nothing, when the holder is
// closed. h.mu is held.
func (h *Holder) requestCtx(ctx context.Context) (context.Context, bool) {
	c := &h.rq
	if c.ctx != nil && c.parent != nil && c.parent == ctx && c.ctx.Err() == nil {
		return c.ctx, true
	}
	h.endRequestCtx()
	rctx, cancel := context.WithCancel(ctx)
	// Close ends the request wherever it waits.
	if !h.withdrawOnClose(cancel) {
		cancel()
		return nil, false
	}
	c.ctx, c.cancel, c.parent = rctx, cancel, nil
	if t := reflect.TypeOf(ctx); t != nil && t.Comparable() {
		c.parent = ctx
	}
	return rctx, true
}

// endRequestCtx cancels the holder's request context, if it has one: a
// request failed (its calls still in flight are withdrawn) or the next
// one derives from another context. h.mu is held.
func (h *Holder) endRequestCtx() {
	if h.rq.cancel == nil {
		return
	}
	h.rq.cancel()
	h.withdrawOnClose(nil)
	h.rq = reqCtx{}
}
