package group

import (
	"context"
	"sync"
)

// owned is what a Group needs to own the goroutines it starts (casts, and
// the per-node calls of a fan-out that cannot use the Caller's Go): Close
// ends their contexts and waits for them.
type owned struct {
	// life ends when Close begins; every goroutine's context ends with it.
	life    context.Context
	endLife context.CancelFunc

	// mu guards closed, and orders running.Add before Close's Wait: no
	// goroutine is added once Close has begun.
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func (o *owned) init() {
	o.life, o.endLife = context.WithCancel(context.Background())
}

// isClosed reports whether Close has begun.
func (o *owned) isClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}

// goOwned runs f on a goroutine that close waits for, and reports false
// (running nothing) once close has begun.
func (o *owned) goOwned(f func()) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	o.running.Add(1)
	o.mu.Unlock()
	go func() {
		defer o.running.Done()
		f()
	}()
	return true
}

// close ends the goroutines' contexts and waits for them to return.
func (o *owned) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.endLife()
	o.running.Wait()
}

// castContext is the context of a cast started under ctx: ctx's values
// and deadline, not its cancellation (a caller that cancels right after
// the cast returned must not drop it), and the end of the group's life.
// stop releases it.
func (o *owned) castContext(ctx context.Context) (cctx context.Context, stop func()) {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if d, ok := ctx.Deadline(); ok {
		var cancelD context.CancelFunc
		cctx, cancelD = context.WithDeadline(cctx, d)
		stopLife := context.AfterFunc(o.life, cancel)
		return cctx, func() { stopLife(); cancelD(); cancel() }
	}
	stopLife := context.AfterFunc(o.life, cancel)
	return cctx, func() { stopLife(); cancel() }
}

// nodeContext is the context of a per-node call run on a goroutine of the
// group: ctx, ended also by the end of the group's life.
func (o *owned) nodeContext(ctx context.Context) (context.Context, func()) {
	nctx, cancel := context.WithCancel(ctx)
	stopLife := context.AfterFunc(o.life, cancel)
	return nctx, func() { stopLife(); cancel() }
}
