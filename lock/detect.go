package lock

import (
	"context"
	"sync"
	"time"
)

// Deadlock detection, elock's way: only a request that must wait pays for
// it (docs/locks.md). When a request queues while its holder holds
// something, a walk follows wait-for edges from it (blockersOf) on this
// node, and hops to the other nodes with one cast per node and step: to a
// blocker's home node, which sends it on to the nodes its request waits
// on. An edge to another node's holder whose release or Abort is on its
// way ends by itself and is no edge (stalehold.go); another node's queued
// requests are expanded only when that node sends the walk on
// (ProbeArgs.Since). A walk back at its start has found a cycle once that
// request is confirmed to still wait (cycle): the youngest holder on it
// loses (ErrDeadlock). A branch past ProbeLimit locks fails the request
// with ErrProbeLimit. A request still waiting walks again after
// ProbeInterval, doubling up to 16 times it, for cycles formed since.

// Hop is one queued request on a walk's path.
type Hop struct {
	Owner  OwnerID
	Age    int64
	Node   string
	Key    string
	Ticket uint64
	// Wait names the request on its node for good (0 from a node that
	// does not number them): Owner, Key and Ticket may name a later
	// request there by the time a verdict arrives.
	Wait uint64
	// Seq is the holder's request the queued one belongs to (0 from a
	// node that does not say): the holder's node knows whether it ended.
	Seq uint64
}

// WalkID names one walk, so each node expands each holder once per walk.
type WalkID struct {
	Node uint64
	Seq  uint64
}

// ProbeArgs carries a deadlock walk to another node: expand holder Expand
// there, after Path.
type ProbeArgs struct {
	Walk   WalkID
	Path   []Hop
	Expand OwnerID
	// Visits is the number of locks on the walk's branch so far (Path's
	// length): ProbeLimit bounds a branch, not the whole walk.
	Visits int
	// Held, when not 0, says that the walk reached Expand from the last
	// request on Path, which waits on its node for its key behind Expand:
	// behind a hold there that Expand's request Held asked for last, or
	// behind Expand's requests up to Held. Expand's own node is the one
	// that knows whether Expand let that key go there since, or saw those
	// requests fail (blockSeq, goneEdge).
	Held uint64
	// Since, when not 0, comes from Expand's own node: Expand's request
	// in progress is Since, so only its queued requests from Since on are
	// expanded here. An earlier one failed on Expand's node, and its
	// Abort is on its way: its wait ends by itself, it is no edge.
	Since uint64
	// Cycle, when not 0, says that Path is a cycle the walk found, to be
	// confirmed here (cycleAtStart, cycleAtHome): nothing is expanded.
	Cycle uint8
}

// VerdictArgs fails one queued request (a deadlock's loser, or a walk
// past its limit).
type VerdictArgs struct {
	Owner  OwnerID
	Key    string
	Ticket uint64
	Code   int
	// Wait is Hop.Wait: when not 0, only that request is failed.
	Wait uint64
}

// walkMemo remembers which holders a node expanded for which walk, for a
// few seconds (two generations of maps).
type walkMemo struct {
	mu      sync.Mutex // guards cur, old and swapped
	cur     map[walkKey]struct{}
	old     map[walkKey]struct{}
	swapped time.Time
}

type walkKey struct {
	walk WalkID
	o    OwnerID
}

// first reports whether k is new, and remembers it.
func (m *walkMemo) first(k walkKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil || time.Since(m.swapped) > 5*time.Second {
		m.old, m.cur, m.swapped = m.cur, make(map[walkKey]struct{}), time.Now()
	}
	if _, ok := m.cur[k]; ok {
		return false
	}
	if _, ok := m.old[k]; ok {
		return false
	}
	m.cur[k] = struct{}{}
	return true
}

// watchWait is called when request w queues: it walks at once when the
// holder holds something, and again while the request waits, until the
// returned stop is called.
func (n *Node) watchWait(w *waiter, holds bool) func() {
	if holds || w.o.holdsAny() {
		n.walk(w)
	}
	var mu sync.Mutex
	stopped := false
	interval := n.cfg.ProbeInterval
	var t *time.Timer
	mu.Lock() // the first tick must see t
	defer mu.Unlock()
	t = time.AfterFunc(interval, func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		mu.Unlock()
		// Only a wait whose holder holds something can be on a cycle.
		if holds || w.o.holdsAny() {
			n.walk(w)
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			interval = min(2*interval, 16*n.cfg.ProbeInterval)
			t.Reset(interval)
		}
	})
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// walk starts a deadlock walk from queued request w.
func (n *Node) walk(w *waiter) {
	p := &ProbeArgs{Walk: WalkID{Node: n.inc, Seq: n.seq.Add(1)}}
	n.expandWaiter(p, w)
}

// expandOwner expands every request holder x has queued on this node and,
// when x is a holder of this node, sends the walk on to the other nodes
// its request in progress waits on. The queued requests of another
// node's holder are expanded here only when that holder's node sent the
// walk (p.Since): it alone knows which of them still wait.
func (n *Node) expandOwner(p *ProbeArgs, x OwnerID) {
	if n.goneEdge(p, x) {
		// The edge the walk came by ends by itself.
		return
	}
	if len(p.Path) > 0 && x == p.Path[0].Owner {
		// Back at the start, by an edge that x's account keeps (the walk
		// came here to ask, see expandWaiter).
		n.cycle(p.Walk, p.Path)
		return
	}
	if !n.memo.first(walkKey{p.Walk, x}) {
		return
	}
	for _, w := range n.table.waitsOf(x) {
		if p.Since != 0 && w.seq < p.Since {
			// A request its node saw end: its Abort is on its way.
			continue
		}
		n.expandWaiter(p, w)
	}
	if x.Node != n.inc {
		return
	}
	n.mu.Lock()
	h := n.holders[x]
	n.mu.Unlock()
	if h != nil {
		nodes, seq := h.o.whereWaits()
		n.forwardProbe(&ProbeArgs{Walk: p.Walk, Path: p.Path, Visits: p.Visits, Since: seq}, x, 0, nodes)
	}
}

// forwardProbe sends the walk p on to nodes, to expand holder x there;
// held is ProbeArgs.Held.
func (n *Node) forwardProbe(p *ProbeArgs, x OwnerID, held uint64, nodes []string) {
	for _, addr := range nodes {
		if addr != n.cfg.Addr {
			n.castTo(addr, "Probe", &ProbeArgs{Walk: p.Walk, Path: p.Path, Expand: x, Visits: p.Visits, Held: held, Since: p.Since})
		}
	}
}

// expandWaiter follows the edges from queued request w, the last lock of
// p's branch.
func (n *Node) expandWaiter(p *ProbeArgs, w *waiter) {
	path := make([]Hop, len(p.Path), len(p.Path)+1)
	copy(path, p.Path)
	path = append(path, Hop{Owner: w.o.id, Age: w.o.age, Node: n.cfg.Addr, Key: w.key, Ticket: w.ticket, Wait: w.id, Seq: w.seq})
	origin := path[0]
	if len(path) > n.cfg.ProbeLimit {
		// The branch, not the walk: a lock with many holders costs a
		// walk many branches of one step each.
		n.verdict(origin, codeProbeLimit)
		return
	}
	for _, b := range n.table.blockersOf(w) {
		if b.id != origin.Owner && onPath(path, b.id) {
			continue
		}
		next := &ProbeArgs{Walk: p.Walk, Path: path, Visits: len(path)}
		if b.id.Node != n.inc {
			// A holder of another node: only its node knows whether what
			// blocks here still stands (a release or an Abort may be on
			// its way), and which of its requests queued here still
			// wait. Its node goes on from there: to where its request in
			// progress waits, here included, or declares the cycle when
			// b is where the walk started.
			n.forwardProbe(next, b.id, blockSeq(b, w.key), []string{b.originAddr()})
			continue
		}
		if b.id == origin.Owner {
			n.cycle(p.Walk, path)
			return
		}
		n.expandOwner(next, b.id)
	}
}

// cycle fails the request of the youngest holder on path, a cycle, once
// it is confirmed that the request the walk started from still waits: a
// walk that took long may come back after that request ended, by edges
// that came after it (its start is then no wait, and nothing is a
// cycle). Two nodes know: the start's node (is it still queued there?)
// and, for a holder of another node, the holder's own node (did it see
// the request end? Its Abort may be on its way). The walk goes to each
// in turn (ProbeArgs.Cycle), and the last one fails the loser.
func (n *Node) cycle(walk WalkID, path []Hop) {
	n.confirmCycle(walk, path, cycleAtStart)
}

// The steps of a cycle's confirmation (ProbeArgs.Cycle).
const (
	cycleAtStart = 1 // on the start's node: is it still queued?
	cycleAtHome  = 2 // on its holder's node: is its request in progress?
)

// confirmCycle runs one step of the confirmation of cycle path (see
// cycle): on the start's node, or on its holder's node.
func (n *Node) confirmCycle(walk WalkID, path []Hop, step uint8) {
	start := path[0]
	switch step {
	case cycleAtStart:
		if start.Node != n.cfg.Addr {
			n.castTo(start.Node, "Probe", &ProbeArgs{Walk: walk, Path: path, Expand: start.Owner, Visits: len(path), Cycle: cycleAtStart})
			return
		}
		if start.Wait != 0 && !n.table.waiting(start.Owner, start.Wait) {
			return
		}
		if start.Owner.Node != n.inc {
			// A holder of another node: its node says whether the
			// request is still on.
			home := ""
			for _, w := range n.table.waitsOf(start.Owner) {
				if w.id == start.Wait {
					home = w.o.originAddr()
				}
			}
			if home != "" {
				n.castTo(home, "Probe", &ProbeArgs{Walk: walk, Path: path, Expand: start.Owner, Visits: len(path), Cycle: cycleAtHome})
			}
			return
		}
	case cycleAtHome:
		n.mu.RLock()
		h := n.holders[start.Owner]
		n.mu.RUnlock()
		if h == nil || (start.Seq != 0 && !h.requestOn(start.Seq)) {
			return
		}
	default:
		return
	}
	victim := start
	for _, h := range path[1:] {
		if younger(h.Age, h.Owner, victim.Age, victim.Owner) {
			victim = h
		}
	}
	n.verdict(victim, codeDeadlock)
}

// originAddr returns the address of proxy o's holder's node.
func (o *owner) originAddr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.origin
}

func onPath(path []Hop, id OwnerID) bool {
	for _, h := range path {
		if h.Owner == id {
			return true
		}
	}
	return false
}

// verdict fails the queued request h names, here or on its node.
func (n *Node) verdict(h Hop, code int) {
	if h.Node == n.cfg.Addr {
		n.failWaiter(&VerdictArgs{Owner: h.Owner, Key: h.Key, Ticket: h.Ticket, Code: code, Wait: h.Wait})
		return
	}
	n.castTo(h.Node, "Verdict", &VerdictArgs{Owner: h.Owner, Key: h.Key, Ticket: h.Ticket, Code: code, Wait: h.Wait})
}

// failWaiter fails the queued request v names, if it still waits. A
// verdict may arrive after that request ended: it fails nothing then, not
// a later request of the same holder for the same key (Hop.Wait).
func (n *Node) failWaiter(v *VerdictArgs) {
	for _, w := range n.table.waitsOf(v.Owner) {
		if w.key == v.Key && w.ticket == v.Ticket && (v.Wait == 0 || w.id == v.Wait) {
			n.table.fail(w, codeErrs[v.Code])
		}
	}
}

// Probe continues a deadlock walk on this node.
func (s *Service) Probe(ctx context.Context, a *ProbeArgs, _ *Ack) error {
	if len(a.Path) == 0 {
		return nil
	}
	if a.Cycle != 0 {
		s.n.confirmCycle(a.Walk, a.Path, a.Cycle)
		return nil
	}
	s.n.expandOwner(a, a.Expand)
	return nil
}

// Verdict fails a queued request of this node (see VerdictArgs).
func (s *Service) Verdict(ctx context.Context, a *VerdictArgs, _ *Ack) error {
	if _, ok := codeErrs[a.Code]; ok {
		s.n.failWaiter(a)
	}
	return nil
}
