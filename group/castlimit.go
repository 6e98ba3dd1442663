package group

import (
	"context"
	"errors"
	"fmt"
)

// DefaultMaxCastsInFlight is how many casts a Group runs at once unless
// WithMaxCastsInFlight says otherwise.
const DefaultMaxCastsInFlight = 1024

// ErrCastsInFlight is returned by a cast (CastOne, CastAll) whose
// caller's context ended while it waited for one of the group's casts in
// flight to end: the group already runs as many casts as
// WithMaxCastsInFlight allows, which happens when nodes take casts more
// slowly than they come (a stuck local handler, a remote node whose queue
// is full). The cast was not started. The context's error is wrapped too.
// Give the context more time, check the slow nodes, or raise
// WithMaxCastsInFlight.
var ErrCastsInFlight = errors.New("group: too many casts in flight")

// WithMaxCastsInFlight bounds the casts a Group runs at once: each cast
// runs on a goroutine of the group until its Caller's Cast returns (or,
// for the local node, until the handler returns), and one more waits,
// within its caller's context, until one of them has ended, so that a
// loop of casts to a stuck node cannot grow goroutines without limit. n
// must be at least 1; the default is DefaultMaxCastsInFlight.
func WithMaxCastsInFlight(n int) Option {
	return func(c *groupConfig) error {
		if n < 1 {
			return fmt.Errorf("group: WithMaxCastsInFlight(%d): the bound must be at least 1", n)
		}
		c.maxCasts = n
		return nil
	}
}

// acquireCast takes one of the group's cast slots, waiting for one within
// ctx; releaseCast gives it back. The error wraps ErrCastsInFlight and
// ctx's cause, or is ErrClosed's once Close has begun.
func (s *spec) acquireCast(ctx context.Context) error {
	select {
	case s.g.castSlots <- struct{}{}:
		return nil
	default:
	}
	select {
	case s.g.castSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("group: %s %s.%s: %w (limit %d): %w",
			s.policy, s.service, s.method, ErrCastsInFlight, cap(s.g.castSlots), context.Cause(ctx))
	case <-s.g.life.Done():
		return s.closedErr()
	}
}

func (g *Group) releaseCast() { <-g.castSlots }
