package lock

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Mode is the mode of a lock: Shared or Exclusive.
type Mode uint8

const (
	// Shared locks are held together by any number of holders, but never
	// beside an Exclusive one.
	Shared Mode = iota + 1
	// Exclusive locks have one holder and nobody beside it.
	Exclusive
)

// String returns "shared" or "exclusive".
func (m Mode) String() string {
	switch m {
	case Shared:
		return "shared"
	case Exclusive:
		return "exclusive"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// numShards is the table's shards, a power of two: a key's hash picks its
// shard by its low shardBits bits and its slot in the shard's index by the
// bits above them (rowIndex.home).
const (
	shardBits = 8
	numShards = 1 << shardBits
)

// table is a node's lock table: rows by key, sharded by key hash. A shard's
// mutex guards its rows, their managers and the owner lists of its rows;
// nothing on the uncontended path takes any other lock.
type table struct {
	seed   maphash.Seed
	shards [numShards]shard

	// wmu guards waits, the index of queued requests by owner that the
	// deadlock walk expands. Only the contended path touches it.
	wmu   sync.Mutex
	waits map[OwnerID][]*waiter

	// waitSeq numbers the queued requests (waiter.id).
	waitSeq atomic.Uint64
}

type shard struct {
	mu   sync.Mutex // guards rows, their managers and owner lists
	rows rowIndex
	_    [24]byte // keep neighbouring shards' mutexes off one cache line
}

// row is one locked key. It exists while the key is held or waited for.
type row struct {
	// ticket is elock's counter: how many requests the row has seen since
	// it appeared. Ticket 1 took a free key.
	ticket uint64
	mode   Mode
	owners []*owner
	mgr    *manager
	// one is owners' own storage for a row's first holder, the usual
	// only one: beside the row's other fields, not in an array of its own
	// elsewhere in memory.
	one [1]*owner
	// key and hash name the row in its shard's index.
	key  string
	hash uint64
}

// manager is the queue of a contended key, in ticket order. It exists only
// while somebody waits; whichever goroutine releases the key or withdraws
// from it makes the grants, under the shard mutex.
type manager struct {
	queue []*waiter
}

// waiter is one queued request for one key.
type waiter struct {
	o      *owner
	key    string
	mode   Mode
	ticket uint64
	// id names the request on this node for good: a deadlock verdict
	// names it (Hop.Wait), and a row's tickets start again at 1 once its
	// key is free, so owner, key and ticket may name a later request.
	id uint64
	// seq is the owner's request it belongs to: a walk that comes from
	// a remote holder's node expands only its request in progress
	// (ProbeArgs.Since).
	seq  uint64
	done chan error // buffered; receives the verdict exactly once
	// settled is set, under the shard mutex, when the verdict was sent.
	settled bool
}

func newTable() *table {
	return &table{seed: maphash.MakeSeed(), waits: make(map[OwnerID][]*waiter)}
}

var rowPool = sync.Pool{New: func() any {
	r := new(row)
	r.owners = r.one[:0]
	return r
}}

// shard returns key's shard and hash: the hash's low bits chose the
// shard, the rest place the key in the shard's index.
func (t *table) shard(key string) (*shard, uint64) {
	h := maphash.String(t.seed, key)
	return &t.shards[h%numShards], h
}

// newRow makes the row of key (hash h), held by o in mode, and indexes it
// in s.
func (s *shard) newRow(key string, h uint64, o *owner, mode Mode) {
	r := rowPool.Get().(*row)
	r.ticket = 1
	r.mode = mode
	r.owners = append(r.owners[:0], o)
	r.key, r.hash = key, h
	s.rows.put(r)
}

// tryTakeNow takes key for o if that needs no wait, and otherwise changes
// nothing (no ticket, no waiter).
func (t *table) tryTakeNow(o *owner, key string, mode Mode) bool {
	s, h := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, key)
	if r == nil {
		s.newRow(key, h, o, mode)
		return true
	}
	if r.mgr == nil && r.mode == Shared && mode == Shared {
		r.ticket++
		r.owners = append(r.owners, o)
		return true
	}
	return false
}

// tryTake takes key for o's request seq if that needs no wait. On a wait
// it queues a waiter and returns it; the caller must then wait for its
// verdict.
func (t *table) tryTake(o *owner, key string, mode Mode, seq uint64) *waiter {
	s, h := t.shard(key)
	s.mu.Lock()
	r := s.rows.get(h, key)
	if r == nil {
		s.newRow(key, h, o, mode)
		s.mu.Unlock()
		return nil
	}
	r.ticket++
	if r.mgr == nil && r.mode == Shared && mode == Shared {
		r.owners = append(r.owners, o)
		s.mu.Unlock()
		return nil
	}
	if r.mgr == nil {
		r.mgr = &manager{}
	}
	w := &waiter{o: o, key: key, mode: mode, ticket: r.ticket, id: t.waitSeq.Add(1), seq: seq, done: make(chan error, 1)}
	r.mgr.queue = append(r.mgr.queue, w)
	s.mu.Unlock()
	t.wmu.Lock()
	t.waits[o.id] = append(t.waits[o.id], w)
	t.wmu.Unlock()
	return w
}

// wait waits for w's verdict. When ctx or the owner ends first, the request
// is withdrawn; if it was granted in the meantime the grant is given back.
func (t *table) wait(ctx context.Context, w *waiter) error {
	var err error
	select {
	case err = <-w.done:
	case <-ctx.Done():
		err = t.settle(w, ctx.Err())
	case <-w.o.done:
		err = t.settle(w, ErrClosed)
	}
	t.unindex(w)
	return err
}

// settle ends w with err unless it already has a verdict, and returns the
// verdict w ends with. A granted waiter being settled by its own goroutine
// (ctx ended at the same moment) gives the grant back.
func (t *table) settle(w *waiter, err error) error {
	s, h := t.shard(w.key)
	s.mu.Lock()
	if !w.settled {
		t.dequeueLocked(s, h, w)
		w.settled = true
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	v := <-w.done
	if v == nil {
		t.release(w.o, w.key)
		return err
	}
	return v
}

// fail ends w with err (a deadlock verdict) if it still waits. It reports
// whether it did.
func (t *table) fail(w *waiter, err error) bool {
	s, h := t.shard(w.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.settled {
		return false
	}
	t.dequeueLocked(s, h, w)
	w.settled = true
	w.done <- err
	return true
}

func (t *table) unindex(w *waiter) {
	t.wmu.Lock()
	ws := t.waits[w.o.id]
	for i, x := range ws {
		if x == w {
			ws[i] = ws[len(ws)-1]
			ws[len(ws)-1] = nil
			ws = ws[:len(ws)-1]
			break
		}
	}
	if len(ws) == 0 {
		delete(t.waits, w.o.id)
	} else {
		t.waits[w.o.id] = ws
	}
	t.wmu.Unlock()
}

// dequeueLocked takes w out of its row's queue and grants whoever that
// unblocks (a writer that withdraws can let the readers behind it in).
func (t *table) dequeueLocked(s *shard, h uint64, w *waiter) {
	r := s.rows.get(h, w.key)
	if r == nil || r.mgr == nil {
		return
	}
	q := r.mgr.queue
	for i, x := range q {
		if x == w {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			r.mgr.queue = q[:len(q)-1]
			break
		}
	}
	t.grantLocked(s, r)
}

// grantLocked grants the head of r's queue as far as modes allow, in
// ticket order, and deletes the row when nobody holds or wants it.
func (t *table) grantLocked(s *shard, r *row) {
	if r.mgr != nil {
		q := r.mgr.queue
		n := 0
		for n < len(q) {
			w := q[n]
			if len(r.owners) == 0 {
				r.mode = w.mode
			} else if r.mode != Shared || w.mode != Shared {
				break
			}
			r.owners = append(r.owners, w.o)
			w.settled = true
			w.done <- nil
			q[n] = nil
			n++
		}
		if n == len(q) {
			r.mgr = nil
		} else {
			r.mgr.queue = q[n:]
		}
	}
	if len(r.owners) == 0 && r.mgr == nil {
		s.rows.del(r)
		r.owners = r.owners[:0]
		r.key = ""
		rowPool.Put(r)
	}
}

// release gives back o's hold on key; it reports whether anybody waited
// for key.
func (t *table) release(o *owner, key string) (waited bool) {
	s, h := t.shard(key)
	s.mu.Lock()
	r := s.rows.get(h, key)
	if r == nil {
		s.mu.Unlock()
		return false
	}
	waited = r.mgr != nil
	for i, x := range r.owners {
		if x == o {
			last := len(r.owners) - 1
			r.owners[i] = r.owners[last]
			r.owners[last] = nil
			r.owners = r.owners[:last]
			break
		}
	}
	if len(r.owners) == 0 || r.mgr != nil {
		t.grantLocked(s, r)
	}
	s.mu.Unlock()
	return waited
}

// upgrade turns o's shared hold on key exclusive when o is its only holder
// and nobody waits.
func (t *table) upgrade(o *owner, key string) error {
	s, h := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, key)
	if r == nil || len(r.owners) != 1 || r.owners[0] != o || r.mgr != nil {
		return ErrUpgrade
	}
	r.mode = Exclusive
	return nil
}

// blockersOf returns whom queued request w waits for: nobody once it
// has its verdict (granted, failed or withdrawn; it leaves the index of
// waits only when its goroutine wakes, so a walk can still find it). A
// Shared request waits for the nearest Exclusive request queued ahead of
// it when there is one (which waits for the holders in turn), else for
// the holders: it is granted together with the Shared requests around
// it, so it does not wait for them, and a long run of readers costs a
// walk one step each. An Exclusive request waits for the
// holders and for the request just ahead of it, or for the whole run of
// Shared requests just ahead (they are granted together).
func (t *table) blockersOf(w *waiter) []*owner {
	s, h := t.shard(w.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, w.key)
	if r == nil || w.settled {
		// A granted request's holders include its own: read as its
		// blockers, they made a walk from it a cycle of one.
		return nil
	}
	ticket, mode := w.ticket, w.mode
	var ahead []*waiter
	if r.mgr != nil {
		q := r.mgr.queue
		n := 0
		for n < len(q) && q[n].ticket < ticket {
			n++
		}
		ahead = q[:n]
	}
	if mode == Shared {
		for i := len(ahead) - 1; i >= 0; i-- {
			if ahead[i].mode == Exclusive {
				return []*owner{ahead[i].o}
			}
		}
		return append([]*owner(nil), r.owners...)
	}
	out := append([]*owner(nil), r.owners...)
	for i := len(ahead) - 1; i >= 0; i-- {
		if ahead[i].mode == Exclusive {
			if i == len(ahead)-1 {
				out = append(out, ahead[i].o)
			}
			break
		}
		out = append(out, ahead[i].o)
	}
	return out
}

// waiting reports whether o's queued request wait (waiter.id) still
// waits here: queued, with no verdict yet.
func (t *table) waiting(id OwnerID, wait uint64) bool {
	var w *waiter
	t.wmu.Lock()
	for _, x := range t.waits[id] {
		if x.id == wait {
			w = x
		}
	}
	t.wmu.Unlock()
	if w == nil {
		return false
	}
	s, _ := t.shard(w.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return !w.settled
}

// waitsOf returns o's queued requests on this node.
func (t *table) waitsOf(id OwnerID) []*waiter {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return append([]*waiter(nil), t.waits[id]...)
}

// snapshot reports, for tests, the mode and holder count of key.
func (t *table) snapshot(key string) (Mode, int, int) {
	s, h := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, key)
	if r == nil {
		return 0, 0, 0
	}
	q := 0
	if r.mgr != nil {
		q = len(r.mgr.queue)
	}
	return r.mode, len(r.owners), q
}

// downgrade turns o's exclusive hold on key back to shared (a failed
// request undoing its upgrade) and lets the shared waiters in.
func (t *table) downgrade(o *owner, key string) {
	s, h := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, key)
	if r == nil || len(r.owners) != 1 || r.owners[0] != o {
		return
	}
	r.mode = Shared
	t.grantLocked(s, r)
}
