package lock

import (
	"context"
	"sync"
	"sync/atomic"
)

// holderLoss is how a Holder is told that its lease on another node ran
// out (lease.go). Made lazily: a holder that never asks for Lost or
// Context pays for neither.
type holderLoss struct {
	lost  atomic.Bool // set once, before cause is read by anyone
	mu    sync.Mutex  // guards what follows
	cause error
	ch    chan struct{}
	ctx   context.Context
	end   context.CancelCauseFunc
}

// Lost returns a channel that is closed when the holder's lease on
// another node where it holds locks runs out: that node did not answer
// within NodeTimeout - LeaseMargin, and may drop the holder's locks there
// (no sooner than LeaseMargin later) and grant them to another holder.
// From then on the holder must not act on its locks; its Lock and LockOn
// calls fail with ErrLockLost (one waiting, on any node, ends with it),
// its Context ends with a cause that wraps
// it, and its locks on its own node stay held until it releases them or
// is closed. A holder that holds locks only on its own node is never
// lost.
func (h *Holder) Lost() <-chan struct{} {
	l := &h.loss
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		l.ch = make(chan struct{})
		if l.cause != nil {
			close(l.ch)
		}
	}
	return l.ch
}

// Context returns a context that ends when the holder is lost (its
// context.Cause wraps ErrLockLost; see Lost) or closed (cause ErrClosed):
// the context to run the work the holder's locks protect under.
func (h *Holder) Context() context.Context {
	l := &h.loss
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.end = context.WithCancelCause(context.Background())
		switch {
		case l.cause != nil:
			l.end(l.cause)
		case h.life.Err() != nil:
			l.end(ErrClosed)
		}
	}
	return l.ctx
}

// LostCause returns the error the holder was lost with (it wraps
// ErrLockLost), nil while it is not lost.
func (h *Holder) LostCause() error {
	if !h.loss.lost.Load() {
		return nil
	}
	h.loss.mu.Lock()
	defer h.loss.mu.Unlock()
	return h.loss.cause
}

// lose tells the holder that it is lost with cause, once: Lost closes,
// Context ends, and the request it has in progress on other nodes is
// withdrawn (it fails with cause).
func (h *Holder) lose(cause error) {
	l := &h.loss
	l.mu.Lock()
	if l.cause != nil {
		l.mu.Unlock()
		return
	}
	l.cause = cause
	l.lost.Store(true)
	if l.ch != nil {
		close(l.ch)
	}
	if l.end != nil {
		l.end(cause)
	}
	l.mu.Unlock()
	h.reqMu.Lock()
	if h.reqCancel != nil {
		h.reqCancel()
	}
	h.reqMu.Unlock()
}

// closedCtx ends the holder's Context, if made, with ErrClosed (Close).
func (h *Holder) closedCtx() {
	l := &h.loss
	l.mu.Lock()
	if l.end != nil {
		l.end(ErrClosed)
	}
	l.mu.Unlock()
}

// lostErr returns the error the holder was lost with, nil when it is not
// lost: one atomic load on the way into every request.
func (h *Holder) lostErr() error {
	if !h.loss.lost.Load() {
		return nil
	}
	return h.LostCause()
}

// holdsOn reports whether the holder holds locks on node addr.
func (h *Holder) holdsOn(addr string) bool {
	h.viewMu.Lock()
	defer h.viewMu.Unlock()
	for _, rh := range h.remote {
		if rh.node == addr && rh.keys.len() > 0 {
			return true
		}
	}
	return false
}
