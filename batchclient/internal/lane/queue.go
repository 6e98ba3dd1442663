package lane

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// The lane's queue: callers admit and enqueue entries, the writer takes
// them (take) and gives places back as the server answers (release).
//
// Admission keeps what callers hold, encoded, within the queue's limits
// (QueueEntries, QueueBytes), under both overflow policies: admit gives a
// caller a place and reserves bytes for the entry it is about to encode
// (its size when known, see knownSize; else the size of the entry last
// queued, else the whole queue); enqueue turns the reservation into the
// queued entry; unless FailFast, a caller whose encoded entry turns out
// not to fit lets go of it (errNoRoom), waits for room holding nothing,
// and encodes again (waitRoom). Taken entries count until written
// (inWrite). The queue plus the reservations so stay within QueueBytes,
// except for an entry larger than QueueBytes, which fits an empty queue,
// and a short guess: by one entry per caller admitted on it at once.

// errNoRoom tells Submit that its encoded entry does not fit: it drops the
// payload, waits for room (waitRoom), and encodes again.
var errNoRoom = errors.New("batchclient: no room in the queue for the entry")

// bytesFit reports whether an entry of size bytes fits beside qb queued and
// rb reserved bytes.
func (l *Lane) bytesFit(qb, rb int64, size int) bool {
	return qb+rb+int64(size) <= int64(l.cfg.QueueBytes) || qb+rb == 0
}

// hasRoomLocked reports whether the queue has a place and bytes for an
// entry of size bytes, own being the places the caller holds already.
func (l *Lane) hasRoomLocked(size, own int) bool {
	return len(l.queue)+int(l.reserved.Load())-own < l.cfg.QueueEntries &&
		l.bytesFit(int64(l.qBytes+l.inWrite), l.resBytes.Load(), size)
}

// admit applies the overflow policy before the caller encodes anything:
// it reserves a place and est bytes (the entry's size when known, else a
// guess) and returns est, which the caller hands to enqueue or unreserve.
// A caller that would find the queue full fails, or waits, without
// allocating its payload.
func (l *Lane) admit(size int, done <-chan struct{}, ctxErr func() error) (int, error) {
	est := l.guess(size)
	// Lock-free while there is room, as there almost always is: the bytes
	// first, then the place, each by compare-and-swap.
	for {
		rb := l.resBytes.Load()
		if !l.bytesFit(l.qBytesNow.Load(), rb, est) {
			break
		}
		if !l.resBytes.CompareAndSwap(rb, rb+int64(est)) {
			continue
		}
		for {
			r := l.reserved.Load()
			if l.queued()+int(r) >= l.cfg.QueueEntries {
				l.resBytes.Add(-int64(est))
				goto slow
			}
			if l.reserved.CompareAndSwap(r, r+1) {
				return est, nil
			}
		}
	}
slow:
	if l.cfg.FailFast && !l.retired.Load() {
		select {
		case <-l.dead:
		default:
			// Refused without qmu. Callers that retry at once on
			// ErrOverloaded would otherwise all queue on qmu to hear
			// that the queue is full, and the writer, which takes it to
			// ship what is queued, behind them: frames paused for
			// seconds (TestRetryStormKeepsFramesFlowing). A dead or
			// retired lane takes the slow path for its own error.
			return 0, l.overloaded()
		}
	}
	l.qmu.Lock()
	for {
		if err := l.roomLocked(est, done, ctxErr); err != nil {
			return 0, err
		}
		// The guess may have grown while this caller waited.
		if g := l.guess(size); g > est && !l.hasRoomLocked(g, 0) {
			est = g
			continue
		}
		break
	}
	l.reserved.Add(1)
	l.resBytes.Add(int64(est))
	l.qmu.Unlock()
	return est, nil
}

// guess is the bytes to reserve for an entry of size bytes (0: not
// encoded yet): the size of the entry last queued, or, before any, the
// whole queue, so that the first callers do not all encode at once.
func (l *Lane) guess(size int) int {
	if g := max(size, int(l.lastSize.Load())); g > 0 {
		return g
	}
	return l.cfg.QueueBytes
}

// unreserve gives back a place and the est bytes admit reserved.
func (l *Lane) unreserve(est int) {
	l.qmu.Lock()
	l.reserved.Add(-1)
	l.resBytes.Add(-int64(est))
	l.wakeLocked()
	l.qmu.Unlock()
}

// enqueue puts e on the queue in the place admit reserved (with est
// bytes), applying the overflow policy. Under OverflowBlock an entry that
// does not fit is not waited with: errNoRoom, and the caller drops it.
// With own set, a caller that finds the lane quiet takes the socket to
// write its entry itself (mine, see combine.go).
func (l *Lane) enqueue(e *entry, est int, own bool, pc *Pending, done <-chan struct{}, ctxErr func() error) (mine bool, err error) {
	l.qmu.Lock()
	l.resBytes.Add(-int64(est))
	if pc.Keyed && l.keyLanes > 0 && Jump(pc.KeyHash, l.keyLanes) != l.keyIndex && l.deadErr == nil {
		// The key moved to another lane since its caller picked this one
		// (retire.go): the caller picks again.
		l.reserved.Add(-1)
		l.wakeLocked()
		l.qmu.Unlock()
		return false, errKeyMoved
	}
	if e.size > l.frameBytes {
		l.reserved.Add(-1)
		l.wakeLocked()
		l.qmu.Unlock()
		return false, fmt.Errorf("%w: %d bytes, cap %d", ErrTooLarge, e.size, l.frameBytes)
	}
	if err := l.retireErr; err != nil && l.deadErr == nil && l.drainErr == nil {
		// Retired since admit: the caller takes another lane.
		l.reserved.Add(-1)
		l.wakeLocked()
		l.qmu.Unlock()
		return false, err
	}
	if l.deadErr != nil || l.drainErr != nil || !l.hasRoomLocked(e.size, 1) {
		l.reserved.Add(-1)
		if l.deadErr == nil && l.drainErr == nil && !l.cfg.FailFast {
			l.wakeLocked()
			l.qmu.Unlock()
			return false, errNoRoom
		}
		// Fails at once (the lane's error, ErrOverloaded), or finds room
		// that opened meanwhile.
		if err := l.roomLocked(e.size, done, ctxErr); err != nil {
			return false, err
		}
		l.reserved.Add(1)
	}
	l.queue = append(l.queue, e)
	l.qLen.Store(int32(len(l.queue)))
	l.qBytes += e.size
	l.qBytesNow.Store(int64(l.qBytes + l.inWrite))
	// The place is given back only now that the entry holds it: a
	// lock-free admit never sees the two uncounted at once.
	l.reserved.Add(-1)
	l.lastSize.Store(int64(e.size))
	l.queuedTotal++
	if e.Kind != codec.KindCall {
		l.nonCallTotal++
	}
	first := len(l.queue) == 1
	if est > e.size && l.waiting > 0 {
		l.wakeLocked() // the guess was larger than the entry: bytes freed
	}
	mine = own && first && l.mayCombineLocked()
	l.qmu.Unlock()
	if first && !mine {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return mine, nil
}

// waitRoom waits, holding nothing, until an entry of size bytes would fit,
// or fails as roomLocked does.
func (l *Lane) waitRoom(size int, done <-chan struct{}, ctxErr func() error) error {
	l.qmu.Lock()
	if err := l.roomLocked(size, done, ctxErr); err != nil {
		return err
	}
	l.qmu.Unlock()
	return nil
}

// writtenLocked notes that what the writer took last has been written
// (take calls it: the writer takes again only after writing): its bytes
// no longer count against QueueBytes.
func (l *Lane) writtenLocked() {
	l.writtenTotal = l.takenTotal
	if l.inWrite == 0 {
		return
	}
	l.inWrite = 0
	l.qBytesNow.Store(int64(l.qBytes))
	if l.waiting > 0 {
		l.wakeLocked()
	}
}

// maxKeptFrame is the largest frame buffer the writer keeps between
// frames: a kept buffer is memory beside the queue's bound (QueueBytes
// counts the frame only while it is being written).
const maxKeptFrame = 1 << 20

// wakeLocked wakes every caller waiting for room; they check again.
func (l *Lane) wakeLocked() {
	close(l.room)
	l.room = make(chan struct{})
}

// overloaded counts a fail-fast refusal and returns ErrOverloaded, after
// yielding the processor once: the queue is full, and what makes room
// (the lane's writer and reader) needs a processor more than the caller
// does. A caller that retries at once on ErrOverloaded never blocks, and
// a goroutine that never blocks keeps its processor until the runtime
// preempts it: 50,000 of them kept the writer and the reader waiting for
// seconds (TestRetryStormKeepsFramesFlowing).
func (l *Lane) overloaded() error {
	l.cfg.Metrics.ErrOverload.Inc(1)
	runtime.Gosched()
	return ErrOverloaded
}

// roomLocked returns, with qmu held, once the queue has room for an entry
// of size bytes (an entry larger than QueueBytes fits an empty queue); or
// it fails with qmu released: the lane's error, ErrOverloaded (fail-fast
// policy), or the context's error (block policy).
func (l *Lane) roomLocked(size int, done <-chan struct{}, ctxErr func() error) error {
	const own = 0 // the caller holds no place
	for {
		select {
		case <-l.dead:
			err := l.deadErr
			l.qmu.Unlock()
			return err
		default:
		}
		if err := l.drainErr; err != nil {
			l.qmu.Unlock()
			return err
		}
		if err := l.retireErr; err != nil {
			l.qmu.Unlock()
			return err
		}
		if l.hasRoomLocked(size, own) {
			return nil
		}
		if l.cfg.FailFast {
			l.qmu.Unlock()
			return l.overloaded()
		}
		room := l.room
		l.waiting++
		l.qmu.Unlock()
		select {
		case <-room:
		case <-done:
			l.qmu.Lock()
			l.waiting--
			l.qmu.Unlock()
			return ctxErr()
		case <-l.dead:
		}
		l.qmu.Lock()
		l.waiting--
	}
}

func (l *Lane) queued() int { return int(l.qLen.Load()) }

// release gives n places of the window back (answers and credits from the
// server) and wakes the writer if the window had stopped it.
func (l *Lane) release(n int) {
	if l.giveBack(n) {
		l.wakeWriter()
	}
}

// giveBack gives n places of the window back and reports whether the
// writer waits for them (then the caller wakes it: wakeWriter).
func (l *Lane) giveBack(n int) (stalled bool) {
	l.qmu.Lock()
	stalled = l.unfinished >= l.window && len(l.queue) > 0
	l.unfinished = max(0, l.unfinished-n)
	l.qmu.Unlock()
	return stalled
}

// wakeWriter wakes the writer goroutine, unless a wake is pending.
func (l *Lane) wakeWriter() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// take removes from the queue what fits one frame: at least one entry (when
// the window has room), at most batchCap, within frameBytes. It appends
// them to dst[:0], the writer's reused slice.
func (l *Lane) take(dst []*entry) []*entry {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	l.writtenLocked()
	if l.drainErr != nil {
		return nil // the server reads no more
	}
	n, size := 0, 0
	for n < len(l.queue) && n < l.batchCap && l.unfinished+n < l.window {
		size += l.queue[n].size
		if n > 0 && size > l.frameBytes {
			size -= l.queue[n].size
			break
		}
		n++
	}
	if n == 0 {
		if len(l.queue) > 0 && l.unfinished >= l.window {
			l.noteStall() // the server holds a window's worth of this lane
		}
		return nil
	}
	l.takenTotal += uint64(n)
	// Anyone waiting for room may fit now (a large entry waits for bytes,
	// not for a full queue).
	full := l.waiting > 0
	batch := append(dst[:0], l.queue[:n]...)
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	l.qLen.Store(int32(rest))
	l.qBytes -= size
	l.inWrite = size
	l.qBytesNow.Store(int64(l.qBytes + l.inWrite))
	l.unfinished += n
	l.peakUnfinished = max(l.peakUnfinished, l.unfinished)
	l.cfg.Metrics.QueueDepth.Update(int64(rest))
	if full {
		l.wakeLocked()
	}
	return batch
}
