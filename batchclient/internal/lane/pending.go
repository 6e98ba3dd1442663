package lane

import (
	"slices"
	"sync"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// pendingTable holds a lane's calls that wait for their replies, keyed by
// the id each was given when it was registered, as net/rpc's client keys
// its pending map by sequence number.
type pendingTable struct {
	// mu guards calls and nextID, and the stopWatch field of every call
	// while it is in calls (watch sets it after registration; whoever
	// claims the call reads it after taking it out).
	mu     sync.Mutex
	calls  map[uint64]*Pending
	nextID uint64
}

func newPendingTable() pendingTable {
	return pendingTable{calls: make(map[uint64]*Pending)}
}

// register gives pc an id and records it as pending.
func (t *pendingTable) register(pc *Pending) uint64 {
	t.mu.Lock()
	t.nextID++
	id := t.nextID
	t.calls[id] = pc
	t.mu.Unlock()
	return id
}

// claim removes and returns the pending call with id, or nil when it has
// already been claimed (by its reply, a cancel, or the lane's failure).
func (t *pendingTable) claim(id uint64) *Pending {
	t.mu.Lock()
	pc := t.calls[id]
	delete(t.calls, id)
	t.mu.Unlock()
	return pc
}

// claimAll claims the calls of a frame's replies under one lock: pcs[i]
// is the call of replies[i], or nil when its caller has already given up.
func (t *pendingTable) claimAll(replies []codec.Reply, pcs []*Pending) []*Pending {
	pcs = slices.Grow(pcs[:0], len(replies))[:len(replies)]
	t.mu.Lock()
	for i := range replies {
		id := replies[i].ID
		pcs[i] = t.calls[id]
		delete(t.calls, id)
	}
	t.mu.Unlock()
	return pcs
}

// takeAll removes and returns every pending call, leaving the table
// empty; a failing lane completes them all.
func (t *pendingTable) takeAll() map[uint64]*Pending {
	t.mu.Lock()
	calls := t.calls
	t.calls = make(map[uint64]*Pending)
	t.mu.Unlock()
	return calls
}

// watch records stop as the context watch of the pending call with id, to
// be run when the call completes. It reports false when the call has
// already been claimed; the caller must then run stop itself.
func (t *pendingTable) watch(id uint64, stop func() bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	pc, ok := t.calls[id]
	if ok {
		pc.stopWatch = stop
	}
	return ok
}

// empty reports whether no call waits for its reply.
func (t *pendingTable) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls) == 0
}

// Watch records stop as the context watch of the pending call with id,
// run when the call completes. It reports false when the call has
// already been claimed; the caller must then run stop itself.
func (l *Lane) Watch(id uint64, stop func() bool) bool {
	return l.pending.watch(id, stop)
}
