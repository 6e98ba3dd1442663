package lock

import (
	"sync/atomic"
	"time"
)

// What this node heard from the nodes whose holders hold locks here, and
// so when it may declare one lost (liveness.go). Every call of another
// node's holder (Acquire) and every Ping that node sends here counts,
// besides this node's own Pings there that it answered: a node that is
// lost here is one that neither answered nor called for NodeTimeout. Its
// leases (lease.go) rest on that: a holder's lease on this node runs from
// the sending of a call this node received, and this node drops the
// holder's locks no sooner than NodeTimeout after it received its last
// call. The touch is made under the node's read lock, and the drop checks
// it again under the write lock, so that a call that arrives as the node
// is being dropped either keeps it or finds its proxy gone.

// monoBase is the origin of mono's clock.
var monoBase = time.Now()

// mono is a monotonic clock in ns, comparable between the goroutines of
// this process only.
func mono() int64 { return int64(time.Since(monoBase)) }

// originLive is the last time, by mono, this node heard from one origin
// node. Guarded by atomics; the map that holds it by the node's mu.
type originLive struct {
	heard atomic.Int64
}

// touch records that the origin was heard at now (mono); a later time
// recorded already is kept. A time less than slack after the one
// recorded is not written: every call of the origin's holders touches
// the record, and its cache line stays shared between the cores. The
// record is then up to slack older than the last call, and the origin
// lost up to slack sooner: slack is a fraction of the lease margin,
// which covers it (heardSlack).
func (l *originLive) touch(now, slack int64) {
	for {
		old := l.heard.Load()
		if now-old < slack || l.heard.CompareAndSwap(old, now) {
			return
		}
	}
}

// heardSlack is touch's slack: an eighth of the lease margin.
func (n *Node) heardSlack() int64 { return int64(n.cfg.LeaseMargin / 8) }

// quietFor is how long the origin has not been heard, as of now.
func (l *originLive) quietFor(now int64) time.Duration {
	return time.Duration(now - l.heard.Load())
}

// liveForLocked returns the record of origin, made (heard now) on first
// use. n.mu is held (write).
func (n *Node) liveForLocked(origin string) *originLive {
	l := n.live[origin]
	if l == nil {
		l = &originLive{}
		l.heard.Store(mono())
		n.live[origin] = l
	}
	return l
}

// heardFrom records a call from origin, if it has holders here.
func (n *Node) heardFrom(origin string) {
	n.mu.RLock()
	if l := n.live[origin]; l != nil {
		l.touch(mono(), n.heardSlack())
	}
	n.mu.RUnlock()
}
