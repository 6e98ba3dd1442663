package lane

import (
	"math"
	"sync/atomic"
)

// The byte window. A server may grant each lane a byte window in its
// handshake (codec.MetaWindowBytes): the most bytes of batch frames the
// lane may have unfinished there, written and not yet handed back. The
// server holds a frame until the last of its entries has finished, and
// hands its bytes back in a credit message written beside the replies
// (codec.AppendCreditBytes). The lane's writer, its only path to the
// socket, keeps within the window: it writes a frame only while the bytes
// in flight plus the frame's stay within it, except that a frame goes
// alone, whatever its size (within MaxFrameBytes), when nothing else is in
// flight, so that an entry larger than the window cannot stall for ever.
// What the writer has taken from the queue and cannot write yet waits with
// it (Lane.writeLoop), still counted in the queue's bytes, until a credit
// wakes it. A server that grants no byte window leaves the lane bounded by
// entries only, as before.

// maxBatchHeader is the most bytes a batch frame's header takes
// (codec.AppendBatchHeader: array, version, sequence, entry count).
const maxBatchHeader = 1 + 9 + 9 + 5

// byteWindow is a lane's side of the byte window.
type byteWindow struct {
	// limit is the window the server granted, 0 for none.
	limit int64
	// inflight is the bytes of frames written (or being written) and not
	// yet handed back. Only the writer adds to it, the reader takes off.
	inflight atomic.Int64
	// stalled is set by the writer when it waits for bytes to come back.
	stalled atomic.Bool
}

// fitWindow returns how many entries from the front of out, taken and
// encoded, the writer may write now as one frame: within the frame's byte
// cap (as writeFrames counts it) and the byte window. It returns 0 when
// the window is full; a credit then wakes the writer. It returns 0 and
// again when the first entry's arguments are still to be encoded and the
// window has room for them now: the writer encodes and fits again.
func (l *Lane) fitWindow(out []*entry) (n int, again bool) {
	n = l.bw.fit(out, l.frameBytes)
	if n > 0 || l.bw.limit == 0 {
		return n, false
	}
	l.bw.stalled.Store(true)
	// Bytes handed back between the fit and the flag woke no one: look
	// again.
	if n = l.bw.fit(out, l.frameBytes); n > 0 {
		l.bw.stalled.Store(false)
		return n, false
	}
	// encodeDeferred left the first entry as it was (the window was full
	// when it looked), and the bytes came back since: no credit is on its
	// way to wake the writer if those were the last in flight.
	if e := out[0]; e.deferred && e.argState.Load() != argsEncoded && l.bw.room() > 0 {
		l.bw.stalled.Store(false)
		return 0, true
	}
	return 0, false
}

// fit is fitWindow's count.
func (w *byteWindow) fit(out []*entry, frameBytes int) int {
	inflight := w.inflight.Load()
	n, size := 0, 0
	for n < len(out) {
		e := out[n]
		if e.deferred && e.argState.Load() != argsEncoded {
			break // not encoded yet: its size is not known
		}
		s := e.size
		if n > 0 && size+s > frameBytes {
			break
		}
		// An upper bound of the frame's bytes, as the server counts them.
		if w.limit > 0 && inflight+int64(maxBatchHeader+size+s) > w.limit && (n > 0 || inflight > 0) {
			break
		}
		size += s
		n++
	}
	return n
}

// room is the bytes the byte window has left: the writer encodes the
// arguments of deferred entries (Call's) only that far, so that it holds
// no more encoded than it may write (and one entry beyond).
func (w *byteWindow) room() int64 {
	if w.limit == 0 {
		return math.MaxInt64
	}
	return w.limit - w.inflight.Load()
}

// charge counts a frame of size payload bytes, about to be written, as in
// flight. Only the writer calls it.
func (l *Lane) charge(size int) {
	if l.bw.limit > 0 {
		l.bw.inflight.Add(int64(size))
	}
}

// releaseBytes takes n bytes the server handed back off those in flight,
// and wakes the writer if it waits for them.
func (l *Lane) releaseBytes(n uint64) {
	if n == 0 || l.bw.limit == 0 {
		return
	}
	l.bw.inflight.Add(-int64(min(n, uint64(l.bw.inflight.Load()))))
	if l.bw.stalled.CompareAndSwap(true, false) {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// dropDraining fails what the writer holds back for the byte window once
// the server has begun to drain: it reads no more, as for queued entries.
func (l *Lane) dropDraining(out []*entry) {
	l.qmu.Lock()
	err := l.drainErr
	l.qmu.Unlock()
	l.cfg.Metrics.ErrDrain.Inc(int64(len(out)))
	l.failQueued(out, err)
	clear(out)
}
