package lane

import (
	"errors"
	"fmt"
)

// Retiring. A peer whose pool has more lanes than its load needs retires
// one: the lane takes no new entries (Submit fails with ErrRetired, and
// the caller picks another lane of its peer), writes what it has queued,
// and keeps reading until every entry it wrote is answered or credited
// back (Quiet). Its peer then closes it; nothing was lost, failed or run
// twice. A lane that fails while retiring fails its entries as any lane
// does.
//
// Fences keep a key's sends in order when the number of lanes changes and
// the key's lane with it (batchclient's pick): a Fence taken on the key's
// old lane at the change is Passed once everything queued there before
// it has been written and the casts and sends among them credited back,
// that is run by the server. Only then do the key's entries go to its new
// lane.

// ErrRetired tells Submit's caller that the lane is being retired and takes
// no new entries: the caller submits to another lane of its peer. It never
// reaches a user.
var ErrRetired = errors.New("rpcxbatch: lane retired; submit to another lane")

// Retire stops the lane taking entries: later Submits fail with ErrRetired,
// and so do callers waiting for room in its queue. What is queued is
// written as usual.
func (l *Lane) Retire() {
	l.qmu.Lock()
	if l.retireErr == nil {
		l.retireErr = fmt.Errorf("%w (%s)", ErrRetired, l.addr)
		l.wakeLocked()
	}
	l.qmu.Unlock()
}

// Quiet reports whether the lane has nothing queued, being written or
// unfinished (no call waits for its reply, no cast or send for its
// credit): a retired lane that is quiet can be closed without loss.
func (l *Lane) Quiet() bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return len(l.queue) == 0 && l.inWrite == 0 && !l.wbusy && len(l.ws.rest) == 0 &&
		len(l.ws.out) == 0 && l.unfinished == 0 && l.reserved.Load() == 0 && l.pending.empty()
}

// Fence marks what the lane had been given at one moment, for Passed.
type Fence struct {
	queued  uint64 // entries queued before the fence
	nonCall uint64 // casts and sends among them
}

// Fence marks what the lane has been given so far.
func (l *Lane) Fence() Fence {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return Fence{queued: l.queuedTotal, nonCall: l.nonCallTotal}
}

// Passed reports whether everything queued before f has been written and
// the casts and sends among them credited back, or the lane is dead (its
// entries are gone, and none of them can run after a later one).
//
// Credits are counts, not ids: a cast queued after the fence that finishes
// before a send queued before it is counted in that send's place. The
// server runs a lane's sends one after another in lane order, so for a
// key whose entries are sends (the ordered operation) the fence is exact
// unless casts on the same lane overtake them.
func (l *Lane) Passed(f Fence) bool {
	select {
	case <-l.dead:
		return true
	default:
	}
	if l.draining.Load() {
		return true // its queued entries failed; the rest it wrote before
	}
	l.qmu.Lock()
	written := l.writtenTotal
	l.qmu.Unlock()
	return written >= f.queued && l.credited.Load() >= f.nonCall
}
