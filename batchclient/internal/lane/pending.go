package lane

import (
	"slices"
	"sync"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"

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
