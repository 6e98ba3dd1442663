package lock

import (
	"sync"
	"time"
)

// relBox holds what one holder released on one other node and that node
// has not been sent yet: the keys, merged, and one entry for them in the
// node's outbox at most. So the outbox holds at most one Release per
// holder and node, however fast the holder releases, and none is dropped:
// what waits is bounded by what the holder held there. The box also holds
// the holder's Abort for its failed requests there, merged the same way
// while no request there succeeds in between.
//
// Every key in the box was released after the holder's last request to
// that node was sent: the next request there carries the releases
// (AcquireArgs.Released) and empties the box (carried), and if it fails
// the holder puts them back (Holder.resend). So one Release with the
// latest of their Seqs gives back each key exactly as its own would have.
type relBox struct {
	owner OwnerID
	// entry is the box's place in the outbox's queue; the sender makes
	// the message from the box's contents when it starts it.
	entry oneway

	mu sync.Mutex
	// keys are the keys released and not sent yet; all means every key
	// the holder holds there (ReleaseAll).
	keys  []string
	keys0 [1]string // keys' storage for the usual one key
	all   bool
	// seq is the Seq of the latest of their releases.
	seq uint64
	// abortFrom and abortSeq are the failed requests to withdraw there
	// (AbortArgs.From and Seq; abortSeq 0: none).
	abortFrom, abortSeq uint64
	// epoch counts the requests sent to the node (and the holder's end
	// there): a message made in an earlier epoch was carried by a later
	// request, or superseded by a Drop, and is not retried.
	epoch uint64
	// queued is set while entry is in the outbox's queue.
	queued bool
	// notBefore is when the box may be sent: the time its first
	// release lingers until; zero once a release in it must go at once.
	notBefore time.Time
}

// init makes b the empty box of holder owner. It is part of the
// holder's remoteHolds (one allocation for both).
func (b *relBox) init(owner OwnerID) {
	b.owner = owner
	b.entry = oneway{method: "Release", box: b}
	b.keys = b.keys0[:0]
}

// add puts keys released at seq in the box (all: every key held there),
// to go at once or, with linger, not before notBefore. It reports whether
// the box's entry must be queued (it was not) and whether the sender must
// be woken for it (it was queued to linger, and now must go at once).
func (b *relBox) add(keys []string, all bool, seq uint64, linger time.Time) (queue, wake bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	empty := len(b.keys) == 0 && !b.all && b.abortSeq == 0
	if all {
		b.all, b.keys = true, b.keys[:0]
	} else if !b.all {
		b.keys = append(b.keys, keys...)
	}
	b.seq = max(b.seq, seq)
	if !b.queued {
		b.queued = true
		b.notBefore = linger
		return true, false
	}
	if empty {
		// Queued still, emptied by a request since: these releases
		// linger from now, not from the first ones'.
		b.notBefore = linger
		return false, linger.IsZero()
	}
	if linger.IsZero() && !b.notBefore.IsZero() {
		b.notBefore = time.Time{}
		return false, true
	}
	return false, false
}

// addAbort puts in the box the withdrawal of the failed request seq,
// from the first request after lastOK, the holder's last request there
// that succeeded: every request between them failed. It returns what
// add does, and an Abort to send on its own when the box held one for
// requests before a success (their range cannot be merged).
func (b *relBox) addAbort(lastOK, seq uint64) (queue, wake bool, apart *oneway) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.abortSeq != 0 && b.abortFrom != lastOK+1 {
		apart = abortMsg(b.owner, b.abortFrom, b.abortSeq)
		b.abortSeq = 0
	}
	if b.abortSeq == 0 {
		b.abortFrom = lastOK + 1
	}
	b.abortSeq = max(b.abortSeq, seq)
	if !b.queued {
		b.queued = true
		b.notBefore = time.Time{}
		return true, false, apart
	}
	if !b.notBefore.IsZero() {
		b.notBefore = time.Time{}
		return false, true, apart
	}
	return false, false, apart
}

func abortMsg(owner OwnerID, from, seq uint64) *oneway {
	return &oneway{method: "Abort", args: &AbortArgs{Owner: owner, Seq: seq, From: from}}
}

// dropped empties the box of everything: the holder's Drop there
// releases all and withdraws every request.
func (b *relBox) dropped() {
	b.mu.Lock()
	b.abortSeq = 0
	b.mu.Unlock()
	b.carried()
}

// carried empties the box of its releases: a request carrying the
// holder's releases is about to go to the node (or the holder's Drop,
// which releases everything). A Release made from the box earlier is not
// retried. A withdrawal stays: a request does not carry it.
func (b *relBox) carried() {
	b.mu.Lock()
	b.epoch++
	b.keys, b.all, b.seq = b.keys[:0], false, 0
	b.mu.Unlock()
}

// unqueued notes that the box's entry was not queued after all (the node
// is closing).
func (b *relBox) unqueued() {
	b.mu.Lock()
	b.queued = false
	b.mu.Unlock()
}

// take is the sender's look at the box's entry in the queue, at now. It
// appends the messages to start to starts (a Release, an Abort, or both),
// and reports whether the entry stays in the queue (it lingers, or there
// is no room) and until when. A box emptied by a request leaves the queue
// without a message.
func (b *relBox) take(now time.Time, room bool, starts []*oneway) (_ []*oneway, keep bool, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case len(b.keys) == 0 && !b.all && b.abortSeq == 0:
		b.queued = false
		return starts, false, time.Time{}
	case now.Before(b.notBefore):
		return starts, true, b.notBefore
	case !room:
		return starts, true, time.Time{}
	}
	b.queued = false
	if b.abortSeq != 0 {
		starts = append(starts, abortMsg(b.owner, b.abortFrom, b.abortSeq))
		b.abortSeq = 0
	}
	if len(b.keys) == 0 && !b.all {
		return starts, false, time.Time{}
	}
	r := &releaseMsg{args: ReleaseArgs{Owner: b.owner, Seq: b.seq, All: b.all}}
	r.m = oneway{method: "Release", args: &r.args, from: b, epoch: b.epoch}
	if !b.all {
		if len(b.keys) == 1 {
			r.one[0] = b.keys[0]
			r.args.Keys = r.one[:]
		} else {
			r.args.Keys = append([]string(nil), b.keys...)
		}
	}
	b.keys, b.all, b.seq = b.keys[:0], false, 0
	return append(starts, &r.m), false, time.Time{}
}

// stale reports whether m, made from a box, was carried by a later request
// or superseded by a Drop: it is not retried.
func (m *oneway) stale() bool {
	if m.from == nil {
		return false
	}
	m.from.mu.Lock()
	defer m.from.mu.Unlock()
	return m.from.epoch != m.epoch
}

// releaseMsg is a Release in one allocation: the outbox's message, its
// arguments and, for the usual single key, the key list.
type releaseMsg struct {
	m    oneway
	args ReleaseArgs
	one  [1]string
}
