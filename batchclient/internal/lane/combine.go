package lane

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Flat combining: a caller of Call that finds its lane quiet (nothing
// queued or unanswered, the writer idle, no other caller on its way)
// writes its own frame, as plain rpcx's caller writes its own request,
// instead of handing its entry to the writer goroutine and waiting for it
// to run. It takes the socket (Lane.wbusy: one owner at any moment, the
// writer or one caller), writes one frame holding its entry and whatever
// was queued by then, exactly as the writer would, and lets go. With calls
// in flight the writer takes the next ones, so frames stay large.
//
// A caller's write is one attempt bounded by combineWriteBound (or its
// context's deadline, if sooner): a socket that does not take the frame
// at once is a busy or frozen peer, and the caller must not hang on it.
// The rest of the frame goes to the writer goroutine (writerState.rest),
// which writes it first, under the heartbeat's judgement of a frozen peer.
//
// What it buys is small: a tenth more calls/s at one and ten callers on
// a quiet machine, none on a busy one (perf -paths batch -ops call
// -writers 1,10 and BenchmarkCall, alternated with it off; the figures
// are in docs/hot-paths.md, "No hand-off when nobody waits"). It is kept
// for that, and because a quiet lane's call then takes the path a plain
// rpcx call takes (the caller's own write); the server's reply writer,
// where the same hand-off measured no gain, has one owner.

// combining says whether lanes made from now on let their callers write
// their own frames; on unless a test turned it off (SetCombining).
var combining = func() *atomic.Bool {
	var on atomic.Bool
	on.Store(true)
	return &on
}()

// combineWriteBound bounds a caller's write of its own frame; the writer
// goroutine finishes what it leaves.
const combineWriteBound = 5 * time.Millisecond

// errHandOff says that a caller's frame was partly written and its end
// left to the writer goroutine.
var errHandOff = errors.New("batchclient: frame handed to the lane's writer")

// mayCombineLocked reports whether the caller whose entry was just queued,
// alone, may write it itself; it takes the socket if so. Called under qmu.
func (l *Lane) mayCombineLocked() bool {
	if !l.combine || l.wbusy || len(l.queue) != 1 || len(l.ws.rest) > 0 ||
		l.unfinished != 0 || l.reserved.Load() != 0 || l.cfg.Woken.Load() != 0 {
		return false
	}
	l.wbusy = true
	return true
}

// acquireSocket takes the socket for the writer goroutine; false when a
// caller holds it (the caller wakes the writer when it lets go with work
// left).
func (l *Lane) acquireSocket() bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.wbusy {
		return false
	}
	l.wbusy = true
	return true
}

// releaseSocket lets go of the socket.
func (l *Lane) releaseSocket() {
	l.qmu.Lock()
	l.wbusy = false
	l.qmu.Unlock()
}

// writeOwn is a caller's write of its own frame (the socket is its, see
// mayCombineLocked): one frame, then the socket goes back, and the writer
// is woken if entries came meanwhile or the frame's end is left to it.
func (l *Lane) writeOwn(ctx context.Context) {
	ws := &l.ws
	seq := ws.frameSeq
	// The write's bound is set when it starts (write), not now: encoding
	// the frame comes first.
	bound := noDeadline
	if d, ok := ctx.Deadline(); ok {
		bound = d
	}
	start := time.Now().UnixNano()
	err := l.flush(ws, bound, 1)
	l.noteFlush(start, time.Now().UnixNano())
	if ws.frameSeq != seq {
		l.callerFrames.Add(1)
	}
	if errors.Is(err, errHandOff) {
		err = nil
	}
	l.qmu.Lock()
	l.wbusy = false
	// Left for the writer: entries queued meanwhile, the end of this
	// frame, or entries taken that did not fit it (the frame cap, the byte
	// window: the writer then waits for a credit as for its own).
	more := len(l.queue) > 0 || len(ws.rest) > 0 || len(ws.out) > 0
	// What this caller took and wrote no longer counts against
	// QueueBytes. The writer notes that when it takes next (take), but it
	// takes only when woken: without this, a caller whose entry did not
	// fit beside those bytes (a lane's first entries are admitted on the
	// whole queue's bytes) waited for room for ever, its frame never
	// written.
	l.writtenAllLocked(ws)
	l.qmu.Unlock()
	if err != nil {
		l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
		return
	}
	if more {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// noDeadline is the bound of a caller whose context has no deadline.
var noDeadline = time.Unix(1<<62, 0)
