package lane

import (
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// pendingShards is how many shards a lane's pending table has, a power of
// two: with 10,000 callers on a few lanes, one mutex per lane was taken by
// every register and claim and spent its time contended.
const pendingShards = 16

// A call's id names where it waits: its shard in the low shardBits bits,
// its slot in the shard in the next slotBits, and the shard's count of
// registrations above, so that an id is never given twice on a lane (in
// 2^36 registrations per shard) even though slots are reused: a late reply
// to a call that has given up finds its slot empty, or holding another
// id, and claims nothing.
const (
	shardBits = 4 // log2(pendingShards)
	slotBits  = 24
	slotMask  = 1<<slotBits - 1
)

// pendingTable holds a lane's calls that wait for their replies, keyed by
// the id each was given when it was registered, as net/rpc's client keys
// its pending map by sequence number. It is sharded, each call going to a
// shard picked at random (no counter shared by every caller), and a
// shard keeps its calls in a slice of slots that the id indexes: no map,
// no hashing, and a freed slot is the next one taken, while its memory is
// still in the cache.
type pendingTable struct {
	shards [pendingShards]pendingShard
}

// pendingShard is one shard of a pending table.
type pendingShard struct {
	// mu guards the rest, and the stopWatch field of every call while it
	// is in slots (watch sets it after registration; whoever claims the
	// call reads it after taking it out).
	mu sync.Mutex
	// slots holds the shard's calls, a slot for each id; free lists the
	// empty slots, the last freed last.
	slots []pendingSlot
	free  []uint32
	seq   uint64 // registrations so far: the high bits of the next id
	// The shards are taken by different cores at once: one cache line
	// each (mu 8, slots 24, free 24, seq 8 bytes; see the size check in
	// the tests).
}

// pendingSlot is one slot of a shard: the id of the call in it, and the
// call; pc is nil when the slot is free.
type pendingSlot struct {
	id uint64
	pc *Pending
}

func newPendingTable() *pendingTable { return new(pendingTable) }

// locate returns the shard and the slot an id names; whether the call in
// that slot has this id is for the caller to check, under the shard's lock.
func (t *pendingTable) locate(id uint64) (s *pendingShard, slot int) {
	return &t.shards[id&(pendingShards-1)], int(id >> shardBits & slotMask)
}

// register gives pc an id and records it as pending.
func (t *pendingTable) register(pc *Pending) uint64 {
	si := rand.Uint32() & (pendingShards - 1)
	s := &t.shards[si]
	s.mu.Lock()
	var i int
	if n := len(s.free); n > 0 {
		i = int(s.free[n-1])
		s.free = s.free[:n-1]
	} else {
		i = len(s.slots)
		if i > slotMask {
			s.mu.Unlock()
			// 2^24 calls waiting in one shard, 2^28 on one lane: their
			// callers' memory gave out long before.
			panic("rpcxbatch: more calls waiting on one lane than ids can name")
		}
		s.slots = append(s.slots, pendingSlot{})
	}
	s.seq++
	if s.seq<<(shardBits+slotBits) == 0 {
		// The count wrapped (after 2^36 registrations): skip the value
		// that would give id 0, which Submit reads as "not registered".
		s.seq++
	}
	id := s.seq<<(shardBits+slotBits) | uint64(i)<<shardBits | uint64(si)
	s.slots[i] = pendingSlot{id: id, pc: pc}
	s.mu.Unlock()
	return id
}

// takeLocked removes and returns the call with id from s, or nil when it
// is not there (claimed already). s.mu is held.
func (s *pendingShard) takeLocked(id uint64, slot int) *Pending {
	if slot >= len(s.slots) || s.slots[slot].id != id || s.slots[slot].pc == nil {
		return nil
	}
	pc := s.slots[slot].pc
	s.slots[slot] = pendingSlot{}
	s.free = append(s.free, uint32(slot))
	return pc
}

// claim removes and returns the pending call with id, or nil when it has
// already been claimed (by its reply, a cancel, or the lane's failure).
func (t *pendingTable) claim(id uint64) *Pending {
	s, slot := t.locate(id)
	s.mu.Lock()
	pc := s.takeLocked(id, slot)
	s.mu.Unlock()
	return pc
}

// claimAll claims the calls of a frame's replies, taking each shard's lock
// at most once: pcs[i] is the call of replies[i], or nil when its caller
// has already given up.
func (t *pendingTable) claimAll(replies []codec.Reply, pcs []*Pending) []*Pending {
	pcs = slices.Grow(pcs[:0], len(replies))[:len(replies)]
	if len(replies) == 1 {
		pcs[0] = t.claim(replies[0].ID)
		return pcs
	}
	var used uint32 // a bit per shard that holds one of the replies' ids
	for i := range replies {
		used |= 1 << (replies[i].ID & (pendingShards - 1))
	}
	for si := range t.shards {
		if used&(1<<si) == 0 {
			continue
		}
		s := &t.shards[si]
		s.mu.Lock()
		for i := range replies {
			if id := replies[i].ID; id&(pendingShards-1) == uint64(si) {
				pcs[i] = s.takeLocked(id, int(id>>shardBits&slotMask))
			}
		}
		s.mu.Unlock()
	}
	return pcs
}

// takeAll removes and returns every pending call, leaving the table
// empty; a failing lane completes them all. Each shard is taken once.
func (t *pendingTable) takeAll() []*Pending {
	var all []*Pending
	for si := range t.shards {
		s := &t.shards[si]
		s.mu.Lock()
		for i := range s.slots {
			if pc := s.slots[i].pc; pc != nil {
				all = append(all, pc)
			}
		}
		// The slots go; seq stays, so that no id is given twice.
		s.slots, s.free = nil, nil
		s.mu.Unlock()
	}
	return all
}

// waitingLocked is the count of calls in s; s.mu is held.
func (s *pendingShard) waitingLocked() int { return len(s.slots) - len(s.free) }

// watch records stop as the context watch of the pending call with id, to
// be run when the call completes. It reports false when the call has
// already been claimed; the caller must then run stop itself.
func (t *pendingTable) watch(id uint64, stop func() bool) bool {
	s, slot := t.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot >= len(s.slots) || s.slots[slot].id != id || s.slots[slot].pc == nil {
		return false
	}
	s.slots[slot].pc.stopWatch = stop
	return true
}

// empty reports whether no call waits for its reply. The shards are
// looked at one after the other: on a draining lane, the only one that
// asks, no call is written any more, so the calls that wait for a reply
// only ever get fewer.
func (t *pendingTable) empty() bool {
	for si := range t.shards {
		s := &t.shards[si]
		s.mu.Lock()
		n := s.waitingLocked()
		s.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// Watch records stop as the context watch of the pending call with id,
// run when the call completes. It reports false when the call has
// already been claimed; the caller must then run stop itself.
func (l *Lane) Watch(id uint64, stop func() bool) bool {
	return l.pending.watch(id, stop)
}

// Pending is a call waiting for its reply.
type Pending struct {
	// Call is the rpcx call: its service, method and arguments go out,
	// its Reply, Error and ResMetadata come back, and it is sent on its
	// Done channel when it completes.
	Call *client.Call
	// stopWatch, when set (Watch), unregisters the context watch of a
	// call made with Go.
	stopWatch func() bool
	// DeferDecode says the caller waits for the call and can decode the
	// reply itself (Call does). The reader then decodes only small replies,
	// whose bytes it has just read and which take it a moment; a larger
	// one it copies into Raw and sets Undecoded, and the caller decodes it
	// on its own goroutine, so one big reply does not hold up the lane's
	// other replies. A failed call's reply (what its handler filled in)
	// is always left to such a caller: it decodes it only if it returns
	// the handler's error (see batchclient's callResult).
	DeferDecode bool
	Undecoded   bool
	Raw         []byte
	// Group, when set, marks the call as one of a group that ends
	// together (batchclient's calls on one shared context): ClaimGroup
	// claims the group's calls still pending.
	Group any
	// Keyed says the entry was made under a key (batchclient's WithKey),
	// whose hash is KeyHash: the lane takes it only while the key is its
	// own (SetKeySlot), so that a key's entries never go to two lanes at
	// once.
	Keyed   bool
	KeyHash uint64
	// ServerTimeout makes an entry with a deadline carry rpcx's
	// "__ServerTimeout" metadata, as rpcx's XClient adds it to a call
	// whose context has a deadline (codec.Entry.ServerTimeout). Set it
	// only when the context carries no request metadata map: the entry
	// then looks for none (entryMetadata), and the map, were there one,
	// would go unsent.
	ServerTimeout bool
	// Response, when set, receives what the call's reply carried, as
	// rpcx's client reads a response message (for the XClient's
	// ClientAfterDecode plugins): the reader fills it before it completes
	// the call.
	Response *Response
}

// Response is what one reply carried, as rpcx's client has it once it
// decoded a response message: its payload inflated, the compress flag it
// came with.
type Response struct {
	// Read says a reply (or the server's error) was read for the call.
	Read bool
	// Payload is the reply's payload (the handler's reply beside an
	// error too, when the server sent one), a copy of its own.
	Payload []byte
	// Compress is the reply's compress flag.
	Compress protocol.CompressType
}

// Finish completes pc, a call claimed from the lane, with err: its watch
// is stopped and it is sent on its Done channel.
func (l *Lane) Finish(pc *Pending, err error) {
	if pc.DeferDecode {
		// A caller of Call is about to run (see Config.Woken); counted
		// before it can be, so the count never goes below zero.
		l.cfg.Woken.Add(1)
	}
	l.finishCounted(pc, err)
}

// finishCounted is Finish for a call whose caller, if a caller of Call
// (DeferDecode), Config.Woken counts already: the reader counts a reply
// frame's callers with one addition (countWoken) instead of one per reply,
// a write to a cache line that every caller writes too.
func (l *Lane) finishCounted(pc *Pending, err error) {
	if pc.stopWatch != nil {
		pc.stopWatch()
	}
	call := pc.Call
	call.Error = err
	if !plainconn.Deliver(call) && pc.DeferDecode {
		l.cfg.Woken.Add(-1)
	}
}

// countWoken counts in Config.Woken the callers of Call among pcs, the
// calls a reply frame is about to complete (nil: none), before any of
// them can run; their completion is finishCounted's.
func (l *Lane) countWoken(pcs []*Pending) {
	n := 0
	for _, pc := range pcs {
		if pc != nil && pc.DeferDecode {
			n++
		}
	}
	if n > 0 {
		l.cfg.Woken.Add(int64(n))
	}
}

// register gives call an id and records it as pending.
func (l *Lane) register(call *Pending) uint64 {
	return l.pending.register(call)
}

// Claim removes and returns the pending call with id, or nil when it has
// already been claimed (by its reply, a cancel, or fail). Whoever claims
// a call completes it (Finish).
func (l *Lane) Claim(id uint64) *Pending {
	call := l.pending.claim(id)
	l.checkDrained()
	return call
}

// ClaimGroup removes and returns, appended to dst, the pending calls
// whose Group is g; whoever claims a call completes it (Finish). Each
// shard is taken once.
func (l *Lane) ClaimGroup(g any, dst []*Pending) []*Pending {
	for si := range l.pending.shards {
		s := &l.pending.shards[si]
		s.mu.Lock()
		for i := range s.slots {
			if pc := s.slots[i].pc; pc != nil && pc.Group == g {
				dst = append(dst, s.takeLocked(s.slots[i].id, i))
			}
		}
		s.mu.Unlock()
	}
	l.checkDrained()
	return dst
}
