package batchserver

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx carries a caller's deadline to a handler without arming a
// timer unless the handler asks for Done or derives a context from it:
// context.WithDeadline arms one per call, most handlers never look, and at
// hundreds of thousands of entries a second the timers alone cost more
// than the frame that carried them (BenchmarkEntryDeadline).
//
// When the handler does ask, the context becomes a real one: a
// context.WithDeadline made then (inner), whose Done and Err it returns
// from then on, and whose cancelCtx a derived context finds through Value
// and registers with, as package context does, instead of starting a
// goroutine to watch Done (TestDerivedContextsStartNoGoroutine).
//
// It keeps context.Context's contract (Err is nil until Done is closed,
// then never changes); the deadline or the entry's end, first, decides it.
type deadlineCtx struct {
	deadline time.Time

	mu sync.Mutex // guards inner, cancelInner and err
	// inner is the context made on the first Done or lookup of a context
	// package key; nil until then.
	inner       context.Context
	cancelInner context.CancelFunc
	// err is the verdict reached before inner was made, if any.
	err error
}

// newDeadlineCtx returns a context that ends at d. parent is not used: the
// context is rooted in context.Background, as an entry's is.
func newDeadlineCtx(_ context.Context, d time.Time) *deadlineCtx {
	return &deadlineCtx{deadline: d}
}

// end ends the entry's context; a nil deadlineCtx (no deadline) is fine.
func (c *deadlineCtx) end() {
	if c != nil {
		c.cancel()
	}
}

// Deadline returns the caller's deadline.
func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed at the deadline or when the entry ends,
// making inner (and its timer) on first use.
func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.innerLocked().Done()
}

// innerLocked returns inner, made on first use in the state the context
// is in: ended by the entry, past its deadline, or running.
func (c *deadlineCtx) innerLocked() context.Context {
	if c.inner != nil {
		return c.inner
	}
	if c.err == context.Canceled {
		// The entry ended first, and Err may have said so already: inner
		// must say Canceled too, even past the deadline, when a
		// context.WithDeadline would be done with DeadlineExceeded.
		c.inner, c.cancelInner = context.WithCancel(context.Background())
		c.cancelInner()
		return c.inner
	}
	// A deadline already past makes inner done at once, with
	// DeadlineExceeded, the verdict Err gave or will give.
	c.inner, c.cancelInner = context.WithDeadline(context.Background(), c.deadline)
	return c.inner
}

// Err returns nil until Done is closed; then context.DeadlineExceeded if
// the deadline passed first, context.Canceled if the entry ended first.
func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		return c.inner.Err()
	}
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
	return c.err
}

// Value answers package context's own lookup of the cancelCtx below a
// context (its key is an *int, context's cancelCtxKey): with inner's, made
// for it, so that a derived context is inner's child. Other keys are not
// this context's.
func (c *deadlineCtx) Value(key any) any {
	if _, ok := key.(*int); !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.innerLocked().Value(key)
}

// cancel ends the entry: inner, if made, is cancelled (its timer stopped),
// and Done closes.
func (c *deadlineCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		c.cancelInner()
		return
	}
	if c.err == nil {
		c.err = context.Canceled
	}
}
