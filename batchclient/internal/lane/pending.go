package lane

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// pendingShards is how many shards a lane's pending table has, a power of
// two: with 10,000 callers on a few lanes, one mutex per lane was taken by
// every register and claim and spent its time contended.
const pendingShards = 16

// pendingTable holds a lane's calls that wait for their replies, keyed by
// the id each was given when it was registered, as net/rpc's client keys
// its pending map by sequence number. It is sharded by id (id &
// (pendingShards-1)): consecutive ids, as a lane's callers take them,
// fall in different shards.
type pendingTable struct {
	nextID atomic.Uint64 // the last id given
	_      [56]byte      // nextID's cache line is its own
	shards [pendingShards]pendingShard
}

// pendingShard is one shard of a pending table.
type pendingShard struct {
	// mu guards calls, and the stopWatch field of every call while it is
	// in calls (watch sets it after registration; whoever claims the call
	// reads it after taking it out).
	mu    sync.Mutex
	calls map[uint64]*Pending
	// The shards are taken by different cores at once: one cache line
	// each.
	_ [64 - 16]byte
}

func newPendingTable() *pendingTable {
	t := new(pendingTable)
	for i := range t.shards {
		t.shards[i].calls = make(map[uint64]*Pending)
	}
	return t
}

func (t *pendingTable) shard(id uint64) *pendingShard {
	return &t.shards[id&(pendingShards-1)]
}

// register gives pc an id and records it as pending.
func (t *pendingTable) register(pc *Pending) uint64 {
	id := t.nextID.Add(1)
	s := t.shard(id)
	s.mu.Lock()
	s.calls[id] = pc
	s.mu.Unlock()
	return id
}

// claim removes and returns the pending call with id, or nil when it has
// already been claimed (by its reply, a cancel, or the lane's failure).
func (t *pendingTable) claim(id uint64) *Pending {
	s := t.shard(id)
	s.mu.Lock()
	pc := s.calls[id]
	delete(s.calls, id)
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
				pcs[i] = s.calls[id]
				delete(s.calls, id)
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
		calls := s.calls
		s.calls = make(map[uint64]*Pending)
		s.mu.Unlock()
		for _, pc := range calls {
			all = append(all, pc)
		}
	}
	return all
}

// watch records stop as the context watch of the pending call with id, to
// be run when the call completes. It reports false when the call has
// already been claimed; the caller must then run stop itself.
func (t *pendingTable) watch(id uint64, stop func() bool) bool {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	pc, ok := s.calls[id]
	if ok {
		pc.stopWatch = stop
	}
	return ok
}

// empty reports whether no call waits for its reply. The shards are
// looked at one after the other: on a draining lane, the only one that
// asks, no call is written any more, so the calls that wait for a reply
// only ever get fewer.
func (t *pendingTable) empty() bool {
	for si := range t.shards {
		s := &t.shards[si]
		s.mu.Lock()
		n := len(s.calls)
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
	// other replies.
	DeferDecode bool
	Undecoded   bool
	Raw         []byte
}

// Finish completes pc, a call claimed from the lane, with err: its watch
// is stopped and it is sent on its Done channel.
func (l *Lane) Finish(pc *Pending, err error) {
	if pc.stopWatch != nil {
		pc.stopWatch()
	}
	call := pc.Call
	call.Error = err
	if pc.DeferDecode {
		// A caller of Call is about to run (see Config.Woken); counted
		// before it can be, so the count never goes below zero.
		l.cfg.Woken.Add(1)
	}
	if !Deliver(call) && pc.DeferDecode {
		l.cfg.Woken.Add(-1)
	}
}

// Deliver sends a completed call on its Done channel and reports whether
// it had room. rpcx's rule: a Done channel with no room is the caller's
// bug, and rpcx says so in the same words.
func Deliver(call *client.Call) bool {
	select {
	case call.Done <- call:
		return true
	default:
		log.Debug("rpc: discarding Call reply due to insufficient Done chan capacity")
		return false
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

// PendingCalls is the count of calls waiting for their replies on the
// lane, for tests and diagnostics.
func (l *Lane) PendingCalls() int {
	n := 0
	for si := range l.pending.shards {
		s := &l.pending.shards[si]
		s.mu.Lock()
		n += len(s.calls)
		s.mu.Unlock()
	}
	return n
}
