package batchserver

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx carries a caller's deadline to a handler without arming a
// timer unless the handler asks for Done. context.WithDeadline arms one per
// call, and most handlers never look: at hundreds of thousands of entries a
// second the timers alone cost more than the frame that carried them.
type deadlineCtx struct {
	context.Context // the parent; never done (rooted in context.Background)
	deadline        time.Time

	mu    sync.Mutex
	done  chan struct{}
	timer *time.Timer
	ended bool
}

func newDeadlineCtx(parent context.Context, d time.Time) *deadlineCtx {
	return &deadlineCtx{Context: parent, deadline: d}
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
// arming the timer on first use.
func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if left := time.Until(c.deadline); left <= 0 || c.ended {
			close(c.done)
		} else {
			c.timer = time.AfterFunc(left, c.fire)
		}
	}
	return c.done
}

func (c *deadlineCtx) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// Err returns context.DeadlineExceeded once the deadline has passed, and
// context.Canceled once the entry has ended before it.
func (c *deadlineCtx) Err() error {
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return context.Canceled
	}
	return nil
}

// cancel ends the entry: the timer, if armed, is stopped, and Done closes.
func (c *deadlineCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.done != nil {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
}
