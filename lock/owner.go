package lock

import (
	"context"
	"sync"
	"sync/atomic"
)

// OwnerID names a holder across the cluster: the incarnation of the node
// the holder lives on and a sequence number there.
type OwnerID struct {
	Node uint64
	Seq  uint64
}

// owner is a holder as the lock table sees it: a local Holder, or on
// another node the proxy that holds locks there on that Holder's behalf.
type owner struct {
	id  OwnerID
	age int64 // creation time in ns; a larger age is a younger holder
	// origin is the address of the holder's node ("" for a local holder).
	origin    string
	originInc uint64
	// live is origin's record of when this node last heard from it
	// (heard.go); nil for a local holder.
	live *originLive

	done chan struct{} // closed when the owner is dropped

	mu   sync.Mutex // guards held, waitingOn and the remote proxies' fields below (closed is written under it)
	held heldSet
	// closed is written under mu; atomic so that the liveness loop and
	// tests may read it without mu.
	closed atomic.Bool
	// waitingOn lists the other nodes a local holder's request in
	// progress was sent to: where a deadlock walk finds it waiting.
	waitingOn []string
	waitBuf   [2]string
	// waitSeq is that request's seq.
	waitSeq uint64

	// Remote proxies only: the state of their requests (remotereq.go).
	remoteReqs
}

// heldKey is one key an owner holds: its mode, the request that took it,
// the request that upgraded it (0: none) and the last request that asked
// for it again.
type heldKey struct {
	mode  Mode
	grant uint64
	up    uint64
	last  uint64
}

func newOwner(id OwnerID, age int64, origin string) *owner {
	return &owner{id: id, age: age, origin: origin, done: make(chan struct{})}
}

// younger reports whether o is younger than p: the one that loses a
// deadlock.
func younger(aAge int64, a OwnerID, bAge int64, b OwnerID) bool {
	if aAge != bAge {
		return aAge > bAge
	}
	if a.Node != b.Node {
		return a.Node > b.Node
	}
	return a.Seq > b.Seq
}

// take takes keys in mode for request seq, in the order given, waiting where
// it must. On failure it gives back what this request took and undoes its
// upgrades, so o keeps exactly what it held before. Every wait is shown to
// n's deadlock detector first; holdsElsewhere tells it that the holder
// holds something on another node. onWait, when not nil, is called once,
// before the first wait.
//
// Every change to o's books (o.held) is made under o.mu together with the
// table change it stands for (owner before shard is the lock order), so
// that no Abort, Release or later request of a remote holder finds the
// two apart. Only the wait itself is outside o.mu.
func (o *owner) take(ctx context.Context, n *Node, keys []string, mode Mode, seq uint64, holdsElsewhere bool, onWait func()) error {
	t := n.table
	var took, upgraded []string
	rollback := func() {
		o.mu.Lock()
		for _, k := range took {
			o.held.del(k)
			t.release(o, k)
		}
		for _, k := range upgraded {
			if hk, ok := o.held.get(k); ok {
				hk.mode, hk.up = Shared, 0
				o.held.set(k, hk)
				t.downgrade(o, k)
			}
		}
		o.mu.Unlock()
	}
	for _, k := range keys {
		o.mu.Lock()
		if o.closed.Load() {
			o.mu.Unlock()
			rollback()
			return ErrClosed
		}
		hk, ok := o.held.get(k)
		if ok {
			// Re-entry: read and written in one critical section, with
			// the upgrade between, so nothing can change the books
			// under it.
			if hk.mode == Shared && mode == Exclusive {
				if err := t.upgrade(o, k); err != nil {
					o.mu.Unlock()
					rollback()
					return err
				}
				hk.mode = Exclusive
				hk.up = seq
				upgraded = append(upgraded, k)
			}
			hk.last = seq
			o.held.set(k, hk)
			o.mu.Unlock()
			continue
		}
		// The uncontended take records the key in one go.
		w := t.tryTake(o, k, mode, seq)
		if w == nil {
			o.held.set(k, heldKey{mode: mode, grant: seq, last: seq})
			o.mu.Unlock()
			took = append(took, k)
			continue
		}
		o.mu.Unlock()
		if onWait != nil {
			onWait()
			onWait = nil
		}
		stop := n.watchWait(w, holdsElsewhere || len(took) > 0 || len(upgraded) > 0)
		err := t.wait(ctx, w)
		stop()
		if err != nil {
			rollback()
			return err
		}
		o.mu.Lock()
		if o.closed.Load() {
			t.release(o, k)
			o.mu.Unlock()
			rollback()
			return ErrClosed
		}
		o.held.set(k, heldKey{mode: mode, grant: seq, last: seq})
		o.mu.Unlock()
		took = append(took, k)
	}
	return nil
}

// takeLocal is take for a holder of this node: keys free to take are
// taken at once, with no bookkeeping for a rollback (takeNow).
func (o *owner) takeLocal(ctx context.Context, n *Node, keys []string, mode Mode, seq uint64, holdsElsewhere bool) error {
	if o.takeNow(n.table, keys, mode, seq) {
		return nil
	}
	return o.take(ctx, n, keys, mode, seq, holdsElsewhere, nil)
}

// takeNow takes keys in mode for request seq when every one of them is
// free to take at once and none is held by o already, and otherwise
// changes nothing and returns false (take then does the full job).
func (o *owner) takeNow(t *table, keys []string, mode Mode, seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.takeNowLocked(t, keys, mode, seq)
}

// takeNowLocked is takeNow with o.mu held.
func (o *owner) takeNowLocked(t *table, keys []string, mode Mode, seq uint64) bool {
	if o.closed.Load() {
		return false
	}
	for i, k := range keys {
		if o.held.has(k) || !t.tryTakeNow(o, k, mode) {
			for _, u := range keys[:i] {
				o.held.del(u)
				t.release(o, u)
			}
			return false
		}
		o.held.set(k, heldKey{mode: mode, grant: seq, last: seq})
	}
	return true
}

// holdsAny reports whether o holds anything on this node.
func (o *owner) holdsAny() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held.len() > 0
}

// release gives back key if o holds it and no request after seq asked for
// it again (seq 0: unconditionally). It reports whether nobody waited
// for key here (quiet): also when o did not hold it here (a key held on
// other nodes only). Books and table change in one critical section: a
// request of o's that comes in meanwhile finds the key in both or in
// neither, never queued behind o's own hold.
func (o *owner) release(t *table, key string, seq uint64) (quiet bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	hk, ok := o.held.get(key)
	if !ok {
		return true
	}
	if seq != 0 && hk.last > seq {
		return false
	}
	o.held.del(key)
	return !t.release(o, key)
}

// releaseLocked is release with o.mu held (owner before shard is the
// lock order).
func (o *owner) releaseLocked(t *table, key string, seq uint64) {
	hk, ok := o.held.get(key)
	if !ok || (seq != 0 && hk.last > seq) {
		return
	}
	o.held.del(key)
	t.release(o, key)
}

// releaseAllLocked gives back every key o holds that no request after
// seq asked for again (AcquireArgs.ReleasedAll). o.mu is held.
func (o *owner) releaseAllLocked(t *table, seq uint64) {
	for k, hk := range o.held.all() {
		if hk.last <= seq {
			o.held.del(k)
			t.release(o, k)
		}
	}
}

// releaseCarried applies the releases request a carries (o.mu held).
func (o *owner) releaseCarried(t *table, a *AcquireArgs) {
	if a.ReleasedAll {
		o.releaseAllLocked(t, a.Seq-1)
	}
	for _, k := range a.Released {
		o.releaseLocked(t, k, a.Seq-1)
	}
}

// releaseGrant undoes what request seq did here (an aborted request): the
// keys it took are given back and its upgrades undone. A key that a later
// request asked for again belongs to that request now and is left alone,
// so a late Abort cannot strip a later grant.
func (o *owner) releaseGrant(t *table, seq uint64) {
	o.undo(t, func(s uint64) bool { return s == seq })
}

// undo gives back the keys taken by the requests failed selects, and
// downgrades the keys they upgraded, unless a request failed does not
// select asked for the key since. Books and table change in one critical
// section (see release): a later request of o's cannot upgrade a key
// between its downgrade in the books and in the table (a writer beside
// readers), nor find a key gone from the books and still in the table.
func (o *owner) undo(t *table, failed func(seq uint64) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.undoLocked(t, failed)
}

// undoLocked is undo with o.mu held.
func (o *owner) undoLocked(t *table, failed func(seq uint64) bool) {
	for k, hk := range o.held.all() {
		if !failed(hk.last) {
			continue
		}
		switch {
		case failed(hk.grant):
			o.held.del(k)
			t.release(o, k)
		case hk.up != 0 && failed(hk.up):
			hk.mode, hk.up = Shared, 0
			o.held.set(k, hk)
			t.downgrade(o, k)
		}
	}
}

// releaseAll gives back everything o holds. The owner's mutex is held
// across the table releases (owner before shard is the lock order; no path
// takes them the other way round), which saves collecting the keys.
func (o *owner) releaseAll(t *table) {
	o.mu.Lock()
	for k := range o.held.all() {
		t.release(o, k)
	}
	o.held.clear()
	o.mu.Unlock()
}
