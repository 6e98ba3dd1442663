package lane

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Retiring. A lane its peer retires takes no new entries (Submit fails
// with ErrRetired, and the caller picks another lane), writes what it has
// queued, and reads until every entry it wrote is answered or credited
// back; its peer then closes it (CloseRetired): nothing is lost, failed or
// run twice.
//
// Fences keep a key's sends in order when the lane count, and the key's
// lane with it, changes: each old lane is told its place among the new
// lanes (SetKeySlot, or Retire) and refuses the entries of keys no longer
// its own. The moved keys' entries go to their new lanes only once their
// old lane has answered a fence call queued behind everything before
// (SendFence), or, where the server has none, once the Fence taken then
// has Passed; a caller that picked the old lane a moment before is
// refused and picks again.

// ErrRetired tells Submit's caller that the lane is being retired and takes
// no new entries, or no longer takes the entry's key: the caller submits
// to another lane of its peer. It never reaches a user.
var ErrRetired = errors.New("batchclient: lane retired")

// errKeyMoved is ErrRetired for an entry whose key is another lane's now.
var errKeyMoved = fmt.Errorf("%w: the entry's key moved", ErrRetired)

// SetKeySlot makes the lane the index-th of lanes for keys: from now on it
// refuses (ErrRetired) a keyed entry whose key is another lane's, and it
// returns what it had been given before, for Passed. Its peer calls it
// for every lane of the pool once the pool's new view is published: an
// entry queued before is within the fence, one that comes after with a
// key that moved goes to its new lane, where it waits for the fence.
func (l *Lane) SetKeySlot(index, lanes int) Fence {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	l.keyIndex, l.keyLanes = index, lanes
	return Fence{queued: l.queuedTotal, nonCall: l.nonCallTotal}
}

// Jump is Lamping and Veach's jump consistent hash of key over n buckets:
// going from n to n+1 buckets moves only the keys that land in the new
// one, so a change in the number of lanes moves only the keys of the lane
// added or retired.
func Jump(key uint64, n int) int {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// Retire stops the lane taking entries: later Submits fail with ErrRetired,
// and so do callers waiting for room in its queue. What is queued is
// written as usual. It returns what the lane had been given, for Passed:
// nothing comes after it.
func (l *Lane) Retire() Fence {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.retireErr == nil {
		l.retireErr = fmt.Errorf("%w (%s)", ErrRetired, l.addr)
		l.retired.Store(true)
		l.wakeLocked()
	}
	return Fence{queued: l.queuedTotal, nonCall: l.nonCallTotal}
}

// CloseRetired closes a retired lane that is quiet, nothing queued, being
// written or unfinished (no call waits for its reply, no cast or send for
// its credit), and reports whether it did (or the lane was dead already).
// The check and the close are one step under qmu: a caller admitted a
// moment before, whose call is registered but whose entry the lane will
// refuse, is not failed with the lane but claims its call back and picks
// another lane (ErrRetired), as it would had it come a moment later.
func (l *Lane) CloseRetired() bool {
	l.qmu.Lock()
	select {
	case <-l.dead:
		l.qmu.Unlock()
		return true
	default:
	}
	if l.retireErr == nil || len(l.queue) != 0 || l.inWrite != 0 || l.wbusy || len(l.ws.rest) != 0 ||
		len(l.ws.out) != 0 || l.unfinished != 0 || l.reserved.Load() != 0 {
		l.qmu.Unlock()
		return false
	}
	// Nothing was written that is not answered: the calls still
	// registered are those refused (their Submit claims them back), so
	// fail, which would finish them, is not called; the reader's fail on
	// the closed connection finds the lane dead and does nothing.
	l.deadErr = l.retireErr
	close(l.dead)
	l.qmu.Unlock()
	l.conn.Close()
	l.wg.Wait()
	return true
}

// Fence marks what the lane had been given at one moment, for Passed.
type Fence struct {
	queued  uint64 // entries queued before the fence
	nonCall uint64 // casts and sends among them
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

// SendFence queues a fence call (codec.MethodFence) behind everything the
// lane has queued and returns it: its Done receives it when the server has
// run every send the lane wrote before it. It is queued however full the
// queue is (one small entry beyond its bounds, for each change of the
// pool's size): a lane whose queue is full is one the server's window
// holds back, and there the casts queued after the fence would finish in
// place of the slow sends before it, so that Passed would let the moved
// keys go while those still run. An error (the lane dead, draining or
// retired) or an error reply (a server that has no fence) leaves its
// caller to judge by Passed.
func (l *Lane) SendFence() (*client.Call, error) {
	call := &client.Call{ServicePath: codec.ServicePath, ServiceMethod: codec.MethodFence, Done: make(chan *client.Call, 1)}
	e := getEntry()
	e.Kind, e.ServicePath, e.ServiceMethod = codec.KindCall, codec.ServicePath, codec.MethodFence
	e.SerializeType = uint8(l.cfg.SerializeType)
	e.size = codec.EntrySize(&e.Entry)
	id := l.register(&Pending{Call: call})
	e.ID = id
	if err := l.enqueueFence(e); err != nil {
		putEntry(e)
		if l.Claim(id) == nil {
			return nil, ErrFinished
		}
		return nil, err
	}
	return call, nil
}

// enqueueFence puts the fence call e on the queue without admission: no
// place or bytes are reserved for it, and it waits for none.
func (l *Lane) enqueueFence(e *entry) error {
	l.qmu.Lock()
	if err := cmp.Or(l.deadErr, l.drainErr, l.retireErr); err != nil {
		l.qmu.Unlock()
		return err
	}
	l.queue = append(l.queue, e)
	l.qLen.Store(int32(len(l.queue)))
	l.qBytes += e.size
	l.qBytesNow.Store(int64(l.qBytes + l.inWrite))
	l.queuedTotal++
	first := len(l.queue) == 1
	l.qmu.Unlock()
	if first {
		l.wakeWriter()
	}
	return nil
}
