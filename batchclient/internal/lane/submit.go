package lane

import (
	"context"
	"errors"
	"fmt"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// ErrFinished tells Submit's caller that the lane completed the call
// itself (see Lane.fail): its result is on its Done channel.
var ErrFinished = errors.New("batchclient: call finished by its lane")

// Submit queues one entry on the lane (kind, and pc.Call's service,
// method and arguments), applying the queue's admission and overflow
// policy within ctx, and encoding the arguments on the caller's goroutine
// unless deferArgs (then the writer encodes them). For a call it
// registers pc and returns its id. A deferred entry is returned to its
// caller, who must Withdraw it when the call is over.
func (l *Lane) Submit(ctx context.Context, kind codec.Kind, pc *Pending, deferArgs bool) (uint64, Deferred, error) {
	call := pc.Call
	var id uint64
	// The entry's size: once it has been encoded, or known before (never
	// for a deferred entry: knownSize is not called for it, so that a
	// caller of Call does not grow its stack for knownSize's frame).
	size := 0
	if !deferArgs {
		size = l.knownSize(kind, call)
	}
	if size > l.frameBytes {
		// Before admission: a full queue would say ErrOverloaded (retry),
		// or make the caller wait for room it can never use.
		return 0, Deferred{}, fmt.Errorf("%w: %d bytes, cap %d", ErrTooLarge, size, l.frameBytes)
	}
	for {
		est, err := l.admit(size, ctx.Done(), ctx.Err)
		if err != nil {
			return 0, Deferred{}, l.unregistered(kind, id, err)
		}
		var e *entry
		if deferArgs {
			e, err = l.newDeferredEntry(ctx, call.ServicePath, call.ServiceMethod, call.Args, pc.ServerTimeout)
		} else {
			// Sized as known (this entry before, or the last one queued),
			// not as the first guess (the whole queue).
			e, err = l.newEntry(ctx, kind, call.ServicePath, call.ServiceMethod, call.Args, min(est, max(size, int(l.lastSize.Load()))), pc.ServerTimeout)
		}
		if err != nil {
			l.unreserve(est)
			return 0, Deferred{}, l.unregistered(kind, id, err)
		}
		if kind == codec.KindCall {
			if id == 0 {
				id = l.register(pc)
			}
			e.ID = id
		}
		// Once queued, e belongs to the lane's writer (a deferred one is
		// shared with the caller, see entry.argState).
		var mine bool
		mine, err = l.enqueue(e, est, deferArgs, pc, ctx.Done(), ctx.Err)
		if mine {
			l.writeOwn(ctx)
		}
		if errors.Is(err, errNoRoom) {
			// Its payload is not held while waiting (queue.go).
			size = e.size
			putEntry(e)
			if err = l.waitRoom(size, ctx.Done(), ctx.Err); err == nil {
				continue
			}
		} else if err != nil {
			putEntry(e)
		}
		if err != nil {
			return 0, Deferred{}, l.unregistered(kind, id, err)
		}
		if !deferArgs {
			return id, Deferred{}, nil
		}
		return id, Deferred{e}, nil
	}
}

// unregistered ends a call that failed before its entry was queued: its
// registration (id, when a call) is withdrawn, unless the lane's fail has
// completed the call already (with its cause): ErrFinished then.
func (l *Lane) unregistered(kind codec.Kind, id uint64, err error) error {
	if kind == codec.KindCall && id != 0 && l.Claim(id) == nil {
		return ErrFinished
	}
	return err
}

// Deferred is a call entry whose arguments the lane's writer encodes
// (Submit with deferArgs). Its caller must Withdraw it once the call is
// over, however it ended, before reusing the arguments.
type Deferred struct{ e *entry }

// Withdraw ends the writer's use of the entry's arguments: it returns
// once the writer no longer reads them.
func (d Deferred) Withdraw() { d.e.withdraw() }
