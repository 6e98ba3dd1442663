package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Perf is the service the calls of both paths go to: each method returns
// its argument, so the reply costs what the request does.
type Perf struct{}

// Tiny echoes the tiny payload.
func (Perf) Tiny(_ context.Context, a, r *testsvc.Args) error { *r = *a; return nil }

// Data echoes the data payload.
func (Perf) Data(_ context.Context, a, r *testsvc.Data) error { *r = *a; return nil }

// Bytes echoes a binary payload.
func (Perf) Bytes(_ context.Context, a, r *[]byte) error { *r = *a; return nil }

// Sink is the target of casts (both paths) and of plain rpcx's "sends",
// which are the same oneway calls since plain rpcx has no send handlers:
// each execution is counted, so a point ends when all have run.
type Sink struct{ c *counter }

// Tiny counts a tiny payload.
func (s Sink) Tiny(context.Context, *testsvc.Args, *testsvc.Args) error { s.c.inc(); return nil }

// Data counts a data payload.
func (s Sink) Data(context.Context, *testsvc.Data, *testsvc.Data) error { s.c.inc(); return nil }

// Bytes counts a binary payload.
func (s Sink) Bytes(context.Context, *[]byte, *[]byte) error { s.c.inc(); return nil }

// counter counts executions and wakes one waiter when a target is
// reached, so that the end of a cast or send point is seen at once rather
// than at the next poll.
type counter struct {
	n      atomic.Int64
	target atomic.Int64

	mu      sync.Mutex
	reached chan struct{}
	closed  bool
}

func newCounter() *counter {
	c := &counter{}
	c.reset()
	return c
}

func (c *counter) inc() {
	if c.n.Add(1) == c.target.Load() {
		c.signal()
	}
}

func (c *counter) signal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		close(c.reached)
		c.closed = true
	}
}

// reset zeroes the count and forgets the target.
func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target.Store(-1)
	c.n.Store(0)
	c.reached, c.closed = make(chan struct{}), false
}

// wait blocks until the count reaches target or timeout passes, and returns
// the count and whether it reached the target.
func (c *counter) wait(target int64, timeout time.Duration) (int64, bool) {
	c.mu.Lock()
	ch := c.reached
	c.mu.Unlock()
	c.target.Store(target)
	// inc compares with ==: a count already past the target never signals.
	if n := c.n.Load(); n >= target {
		return n, true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
	n := c.n.Load()
	return n, n >= target
}
