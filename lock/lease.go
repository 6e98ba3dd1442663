package lock

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Leases: what a node's holders hold on another node is valid, on the
// holders' side, only until NodeTimeout - LeaseMargin after the sending
// of the last call that node answered (a Ping of the peer watch every
// NodeTimeout/8, or any lock request). The other node drops them no
// sooner than NodeTimeout after it received its last call from here
// (heard.go), so the lease runs out first, by the margin.
//
// A reply that comes after the lease ran out may have been received there
// after the locks were dropped: the lease has ended for good, every holder
// with locks on that node is told (Holder.Lost, ErrLockLost), and the next
// reply starts a new lease, its epoch one more; a request granted in an
// epoch that ended before its keys were recorded fails (LockOn). A Ping
// reply that shows the node closed or restarted (a new incarnation) ends
// the lease at once: that node forgot its locks.

// lease is this node's holders' lease on one other node.
type lease struct {
	n    *Node
	addr string
	// until is when the lease runs out, by mono; 0: no lease now.
	until atomic.Int64
	// epoch counts the leases that ended; a grant is good only in the
	// epoch it was made in.
	epoch atomic.Uint64

	mu    sync.Mutex // guards the fields below, and starting and ending leases
	timer *time.Timer
	inc   uint64 // the node's incarnation, as its Pings answered; 0: not known
	done  bool   // stopped: the node is closing
}

// leaseLen is how long a lease lasts from the sending of the call it
// rests on.
func (n *Node) leaseLen() time.Duration {
	return n.cfg.NodeTimeout - n.cfg.LeaseMargin
}

// leaseFor returns the lease on node addr, made on first use.
func (n *Node) leaseFor(addr string) *lease {
	n.mu.RLock()
	l := n.leases[addr]
	n.mu.RUnlock()
	if l != nil {
		return l
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if l = n.leases[addr]; l == nil {
		l = &lease{n: n, addr: addr}
		if n.stopped {
			l.done = true
		}
		n.leases[addr] = l
	}
	return l
}

// leaseOf returns the lease on node addr, nil if none was ever made.
func (n *Node) leaseOf(addr string) *lease {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.leases[addr]
}

// leaseTargets returns origins and the nodes with a lease that runs,
// each once. A lease that ran out is not renewed: the next grant there
// starts a new one.
func (n *Node) leaseTargets(origins []string) []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := origins
	for addr, l := range n.leases {
		if l.until.Load() != 0 && !contains(origins, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// answered extends the lease by a call sent at sent (mono) that the node
// answered, or starts a new one when none runs. It returns the epoch the
// lease is in, and false when no lease runs after it (the call took
// longer than a lease).
func (l *lease) answered(sent int64) (uint64, bool) {
	end := sent + int64(l.n.leaseLen())
	for {
		ep := l.epoch.Load()
		u := l.until.Load()
		if u <= mono() {
			return l.restart(sent)
		}
		// A lease a little shorter than it could be is safe: the calls of
		// every holder of the node renew it, and the line they would all
		// write to stays shared unless the lease gains a 64th.
		if end-u < int64(l.n.leaseLen()/64) || l.until.CompareAndSwap(u, end) {
			if l.epoch.Load() == ep {
				return ep, true
			}
		}
	}
}

// valid returns the epoch of the lease when it runs now.
func (l *lease) valid() (uint64, bool) {
	ep := l.epoch.Load()
	if l.until.Load() <= mono() {
		return ep, false
	}
	return ep, l.epoch.Load() == ep
}

// restart ends the lease if it ran out (telling its holders) and starts a
// new one from sent, if it still runs now.
func (l *lease) restart(sent int64) (uint64, bool) {
	l.mu.Lock()
	u, now := l.until.Load(), mono()
	if u > now {
		// Another call renewed it meanwhile.
		l.mu.Unlock()
		return l.answered(sent)
	}
	ended := u != 0 && l.until.CompareAndSwap(u, 0)
	if ended {
		l.epoch.Add(1)
	}
	ep := l.epoch.Load()
	end := sent + int64(l.n.leaseLen())
	ok := end > now && !l.done
	if ok {
		l.until.Store(end)
		l.armLocked(time.Duration(end - now))
	}
	l.mu.Unlock()
	if ended {
		l.n.loseAt(l.addr, l.n.leaseLen())
	}
	return ep, ok
}

// pinged is a Ping reply to a Ping sent at sent: inc is the node's
// incarnation (0: it closed). A node that closed or restarted forgot its
// locks: the lease ends at once.
func (l *lease) pinged(sent int64, inc uint64) {
	l.mu.Lock()
	known := l.inc
	if inc != 0 {
		l.inc = inc
	}
	l.mu.Unlock()
	if inc == 0 || (known != 0 && inc != known) {
		l.end()
		return
	}
	l.answered(sent)
}

// end ends the lease now, telling its holders, whether or not it ran out.
func (l *lease) end() {
	l.mu.Lock()
	u := l.until.Load()
	ended := u != 0 && l.until.CompareAndSwap(u, 0)
	if ended {
		l.epoch.Add(1)
	}
	l.mu.Unlock()
	if ended {
		l.n.loseAt(l.addr, 0)
	}
}

// armLocked makes the timer fire in d. l.mu is held.
func (l *lease) armLocked(d time.Duration) {
	if l.timer == nil {
		l.timer = time.AfterFunc(d, l.fire)
		return
	}
	l.timer.Reset(d)
}

// fire is the lease's timer: it ends the lease if it ran out, else waits
// for its new end.
func (l *lease) fire() {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	for {
		u, now := l.until.Load(), mono()
		if u == 0 {
			l.mu.Unlock()
			return
		}
		if u > now {
			l.armLocked(time.Duration(u - now))
			l.mu.Unlock()
			return
		}
		if l.until.CompareAndSwap(u, 0) {
			break
		}
	}
	l.epoch.Add(1)
	l.mu.Unlock()
	l.n.loseAt(l.addr, l.n.leaseLen())
}

// stop stops the lease's timer for good (Node.Close).
func (l *lease) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// loseAt tells every holder of this node that holds locks on addr that
// its lease there ended: after d without an answer (0: the node closed or
// restarted).
func (n *Node) loseAt(addr string, d time.Duration) {
	var cause error
	if d > 0 {
		cause = fmt.Errorf("%w: %s did not answer for %v", ErrLockLost, addr, d)
	} else {
		cause = fmt.Errorf("%w: %s closed or restarted and forgot its locks", ErrLockLost, addr)
	}
	n.mu.RLock()
	hs := make([]*Holder, 0, len(n.holders))
	for _, h := range n.holders {
		hs = append(hs, h)
	}
	n.mu.RUnlock()
	for _, h := range hs {
		if h.holdsOn(addr) {
			h.lose(cause)
		}
	}
}
