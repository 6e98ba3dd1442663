package batchclient

import (
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/dial"
	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// How lanes are sized (docs/lanes.md). A peer starts with MinLanes lanes
// and opens one more, up to its cap (MaxLanes, else the pool size the
// server announces), when a lane reports itself saturated (lane/load.go);
// it retires the newest when the pool has been underused for LaneIdle: no
// lane saturated, and the writers' busy time below a quarter of what one
// lane fewer could carry. A light client costs a server one connection, as
// plain rpcx does; a heavy one grows to the cap within milliseconds.
//
// A change publishes a new view. Keyless entries are spread over the new
// lanes at once. A key's lane is jump(hash, lanes): a change moves only
// the keys of the lane added or retired, and those wait, in pick, until
// their old lane has written what it had and the server has run its casts
// and sends (lane.Fence), so a key's sends keep their order. A retired lane
// takes no new entries, finishes what it holds, and is closed once quiet.

// growSettle is how long after a change the pool waits before it opens
// another lane: the lane just opened must first take its share of the
// load.
const growSettle = 10 * time.Millisecond

// fencePoll is how often the manager looks at the fences of a change;
// retirePoll how often at its retiring lanes when no change is under way
// (one may hold a long call).
const (
	fencePoll  = time.Millisecond
	retirePoll = 10 * time.Millisecond
)

// growBackoff is how long a pool whose last dial for another lane failed
// waits before it dials again.
const growBackoff = time.Second

// underusedBusy is the share of one lane's time the pool's writers may be
// busy beyond what one lane fewer carries, for the pool to count as
// underused: half of saturation, so that the lanes left after a
// retirement are not saturated at once.
const underusedBusy = 0.25

// lanePool is the manager's bookkeeping of one pool: the lanes in the
// view, those retiring, and the readings that decide the next change.
type lanePool struct {
	p        *peer
	lanes    []*lane.Lane // in the view, in key order
	retiring []*lane.Lane // out of the view, finishing what they hold
	max      int
	// moving is set while a change's fences have not passed.
	moving *keyMove
	// nextGrow is when the pool may open a lane again: growSettle after
	// a change, growBackoff after a dial that failed.
	nextGrow time.Time
	// The last idle check's readings of the lanes then in the view, and
	// whether any lane reported itself saturated since.
	lastCheck time.Time
	last      lane.Load
	saturated bool
}

// keyMove is a change in the number of lanes whose moved keys wait: from
// are the lanes before it, fences what each had been given then, calls
// the fence calls sent on those that stay (nil: none, or answered), and
// done the lanes whose fence has passed.
type keyMove struct {
	from   []*lane.Lane
	fences []lane.Fence
	calls  []*client.Call
	done   []bool
}

// passed reports whether every fence of the move has passed: on a lane
// that stays, its fence call was answered (the server ran every send
// before it); on the lane retired, or where the server has no fence (an
// error reply), or the lane died or drains, its credits came back
// (lane.Passed: exact on a retired lane, which takes nothing after its
// fence).
func (m *keyMove) passed() bool {
	for i, l := range m.from {
		if m.done[i] {
			continue
		}
		if c := m.calls[i]; c != nil {
			select {
			case <-c.Done:
				m.calls[i] = nil
				if c.Error == nil {
					m.done[i] = true
					continue
				}
			default:
				return false
			}
		}
		if !l.Passed(m.fences[i]) {
			return false
		}
		m.done[i] = true
	}
	return true
}

// laneCap is the most lanes the peer opens to a server that announced
// poolSize.
func (p *peer) laneCap(poolSize int) int {
	if p.env.lanes > 0 {
		return p.env.lanes
	}
	n := poolSize
	if p.env.maxLanes > 0 {
		n = p.env.maxLanes
	}
	return max(1, min(n, MaxLanesCeiling))
}

// firstLanes is how many lanes a pool starts with, cap being laneCap.
func (p *peer) firstLanes(cap int) int {
	if p.env.lanes > 0 {
		return p.env.lanes
	}
	return max(1, min(p.env.minLanes, cap))
}

// serve runs the pool until one of its lanes fails or begins to drain
// (returned, with every lane the pool still has), Stop (nil), or the pool
// has been idle for rpcx's Option.IdleTimeout (nil, idled). It grows and
// shrinks the pool with its load meanwhile.
func (p *peer) serve(lanes []*lane.Lane) (dead *lane.Lane, all []*lane.Lane, idled bool) {
	lp := &lanePool{p: p, lanes: lanes, max: p.laneCap(lanes[0].Handshake().PoolSize),
		nextGrow: time.Now().Add(growSettle), lastCheck: time.Now()}
	lp.last = lp.load()
	for i, l := range lanes {
		l.SetKeySlot(i, len(lanes))
	}
	p.env.lanesOpened(len(lanes))
	defer func() {
		p.env.lanesOpened(-len(lp.lanes) - len(lp.retiring))
	}()
	fast := time.NewTicker(fencePoll)
	fast.Stop()
	var idle *time.Ticker
	var idleC <-chan time.Time // the IdleTimeout check's ticks
	if d := p.env.lane.IdleTimeout; d > 0 {
		t := time.NewTicker(max(d/4, time.Millisecond))
		defer t.Stop()
		idleC = t.C
	}
	defer func() {
		fast.Stop()
		if idle != nil {
			idle.Stop()
		}
	}()
	var every time.Duration // the fast poll's period, 0 while stopped
	for {
		// The fast poll runs only while a change is under way or a lane
		// retires; the idle check only while the pool has lanes to spare:
		// an idle peer at its minimum wakes for nothing.
		want := time.Duration(0)
		switch {
		case lp.moving != nil:
			want = fencePoll
		case len(lp.retiring) > 0:
			want = retirePoll
		}
		if want != every {
			if every = want; want > 0 {
				fast.Reset(want)
			} else {
				fast.Stop()
			}
		}
		var laneIdleC <-chan time.Time
		if p.env.lanes == 0 && len(lp.lanes) > p.firstLanes(lp.max) {
			if idle == nil {
				idle = time.NewTicker(p.env.laneIdle)
				lp.lastCheck = time.Now()
				lp.last = lp.load()
				lp.saturated = false
			}
			laneIdleC = idle.C
		} else if idle != nil {
			idle.Stop()
			idle = nil
		}
		select {
		case <-p.laneDown:
			if l := lp.failed(); l != nil {
				return l, lp.all(), false
			}
		case <-p.stop:
			return nil, lp.all(), false
		case <-idleC:
			if lp.idleFor(p.env.lane.IdleTimeout) {
				return nil, lp.all(), true
			}
		case <-p.saturated:
			lp.saturated = true
			lp.grow()
		case <-fast.C:
			lp.poll()
		case <-laneIdleC:
			lp.idleCheck()
		}
	}
}

// idleFor reports whether no lane of the pool has written a frame or read
// a message for d (lane.LastTraffic): rpcx's client drops a connection
// idle that long (Option.IdleTimeout), failing a call still waiting on it
// as rpcx's read deadline does.
func (lp *lanePool) idleFor(d time.Duration) bool {
	for _, l := range lp.all() {
		if time.Since(l.LastTraffic()) < d {
			return false
		}
	}
	return true
}

// failed returns the lane of the view that failed or drains, if any;
// retiring lanes that failed are dropped (their calls failed with them).
func (lp *lanePool) failed() *lane.Lane {
	for _, l := range lp.lanes {
		select {
		case <-l.Dead():
			return l
		default:
		}
		if l.Draining() {
			return l
		}
	}
	lp.poll()
	return nil
}

// all is every lane of the pool, retiring ones too.
func (lp *lanePool) all() []*lane.Lane {
	return append(append([]*lane.Lane(nil), lp.lanes...), lp.retiring...)
}

// load sums what the lanes have done.
func (lp *lanePool) load() lane.Load {
	var sum lane.Load
	for _, l := range lp.lanes {
		ld := l.Load()
		sum.Busy += ld.Busy
		sum.Frames += ld.Frames
		sum.Entries += ld.Entries
		sum.Stalls += ld.Stalls
	}
	return sum
}

// grow opens one more lane if the pool may have one now. The dial runs on
// the manager's goroutine: meanwhile a lane's failure waits for it (the
// dial is bounded by DialTimeout and HandshakeTimeout, and ends with
// Stop).
func (lp *lanePool) grow() {
	p := lp.p
	if len(lp.lanes) >= lp.max || lp.moving != nil || time.Now().Before(lp.nextGrow) {
		return
	}
	conn, hs, err := p.env.dial.Dial(p.stop, dial.Attempt{})
	if err != nil {
		// The pool carries on as it is; a saturation a while later tries
		// again (not at every one: a server refusing connections).
		lp.nextGrow = time.Now().Add(growBackoff)
		return
	}
	if hs.Incarnation != lp.lanes[0].Handshake().Incarnation {
		// The server restarted: its old lanes are about to fail, and the
		// pool is built anew then.
		conn.Close()
		lp.nextGrow = time.Now().Add(growBackoff)
		return
	}
	l := lane.New(p.env.lane, p.key, conn, hs)
	// Its keys are its own before anyone can pick it.
	l.SetKeySlot(len(lp.lanes), len(lp.lanes)+1)
	lp.change(append(append([]*lane.Lane(nil), lp.lanes...), l), nil)
	p.env.metrics.lanesAdded.Inc(1)
	p.env.lanesOpened(1)
}

// idleCheck retires the newest lane when the pool was underused since the
// last check: no lane saturated, no window stall, and with one lane fewer
// the writers would be busy less than underusedBusy of a lane's time, the
// frames would carry less than half of lane.ShareEntries, and the lanes'
// unfinished entries would fit half the windows (windowFits).
func (lp *lanePool) idleCheck() {
	now := time.Now()
	ld := lp.load()
	span := now.Sub(lp.lastCheck)
	n := len(lp.lanes)
	used := ld.Busy - lp.last.Busy
	frames, entries := ld.Frames-lp.last.Frames, ld.Entries-lp.last.Entries
	fits := lp.windowFits() // read every check: it starts the next span
	underused := !lp.saturated && ld.Stalls == lp.last.Stalls && fits &&
		float64(used) < float64(n-1)*underusedBusy*float64(span) &&
		(frames == 0 || float64(entries)*float64(n) < float64(lane.ShareEntries/2)*float64(frames)*float64(n-1))
	lp.saturated = false
	// A server that pushes keeps the connection a call came on
	// (RemoteConnContextKey) to push on later, as it would keep a plain
	// rpcx connection: a client that listens for pushes keeps its lanes.
	if underused && lp.moving == nil && len(lp.lanes) > lp.p.firstLanes(lp.max) && !lp.p.env.pushWanted() {
		last := lp.lanes[len(lp.lanes)-1]
		// Out of the view first, so that pick no longer hands it out;
		// then it refuses whoever picked it from the old view.
		lp.change(lp.lanes[:len(lp.lanes)-1:len(lp.lanes)-1], last)
		lp.retiring = append(lp.retiring, last)
		lp.p.env.metrics.lanesRetired.Inc(1)
		ld = lp.load()
	}
	lp.lastCheck, lp.last = now, ld
}

// windowFits reports whether the most entries the pool's lanes had
// unfinished at once since the last check would fit, at half the
// server's window each, in one lane fewer: a pool whose lanes each hold
// much of their window (slow handlers) would stall again at once.
func (lp *lanePool) windowFits() bool {
	most := 0
	for _, l := range lp.lanes {
		most += l.PeakUnfinished()
	}
	window := lp.lanes[0].Handshake().Window
	return most <= (len(lp.lanes)-1)*window/2
}

// change publishes lanes as the pool's view, retiring retired (the lane
// it leaves out, or nil); the keys that move wait for their old lanes'
// fences. The view comes first and the fences after it: an entry a
// caller of the old view queues meanwhile is within its lane's fence, and
// once its lane has the fence it refuses the keys it lost (SetKeySlot).
func (lp *lanePool) change(lanes []*lane.Lane, retired *lane.Lane) {
	n := len(lp.lanes)
	m := &keyMove{from: lp.lanes, fences: make([]lane.Fence, n), calls: make([]*client.Call, n), done: make([]bool, n)}
	lp.p.setPool(lanes, m)
	for i, l := range lp.lanes {
		if l == retired {
			m.fences[i] = l.Retire()
			continue
		}
		m.fences[i] = l.SetKeySlot(i, len(lanes))
		if retired != nil {
			// A retirement moves only the retired lane's keys.
			m.done[i] = true
			continue
		}
		// Behind everything the lane took before its fence, however full
		// its queue: credits would be no fence there (lane.SendFence).
		if call, err := l.SendFence(); err == nil {
			m.calls[i] = call
		}
	}
	lp.lanes, lp.moving, lp.nextGrow = lanes, m, time.Now().Add(growSettle)
}

// poll ends a change whose fences passed, and closes the retiring lanes
// that are quiet (or failed).
func (lp *lanePool) poll() {
	if lp.moving != nil && lp.moving.passed() {
		lp.moving = nil
		lp.p.setPool(lp.lanes, nil)
	}
	kept := lp.retiring[:0]
	for _, l := range lp.retiring {
		if l.CloseRetired() {
			lp.p.env.lanesOpened(-1)
			continue
		}
		kept = append(kept, l)
	}
	if len(kept) < len(lp.retiring) {
		// The shared-context watches let go of the closed lanes.
		lp.p.env.lanesClosed()
	}
	clear(lp.retiring[len(kept):])
	lp.retiring = kept
}
