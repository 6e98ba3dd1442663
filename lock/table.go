package lock

import (
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
