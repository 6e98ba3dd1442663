package lock

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// Node is one lock node: the lock table of this process, the lock service
// other nodes reach it by, and the transport it reaches them with.
type Node struct {
	cfg Config
	inc uint64 // this node's incarnation: a random id drawn at start
	// tokens is the last fencing token granted (token.go).
	tokens atomic.Uint64
	table  *table
	seq    atomic.Uint64 // holder sequence numbers

	ctx    context.Context // ends when the node is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines the node owns

	// answers are the requests of this node's holders on other nodes,
	// whose verdicts may come by Answer (answer.go). Every remote request
	// passes here, so they are sharded, each shard with a mutex of its own.
	answers [answerShards]answerShard

	// mu guards what follows. Every request and release of another
	// node's holder reads proxies, and every release to another node
	// reads peers: those only read, under RLock, so that they do not queue
	// behind each other on two cores.
	mu      sync.RWMutex
	closed  bool // Close began: no new holders, requests or grants
	stopped bool // Close ended the background sends
	// holders are the open holders of this node, closed by Close.
	holders map[OwnerID]*Holder
	// tombs are the gone holders of other nodes (see tomb.go).
	tombs     map[OwnerID]tomb
	nextSweep time.Time
	proxies   map[OwnerID]*owner // other nodes' holders' proxies on this node
	// unchecked are the proxies made since the last Ping to their
	// holder's node, by its address: the Ping asks whether their holders
	// are still open (liveness.go).
	unchecked map[string][]OwnerID
	byOrigin  originIndex // the same by node and incarnation (origins.go)
	// live is when this node last heard from each origin node (heard.go).
	live map[string]*originLive
	// leases are this node's holders' leases on the other nodes, by
	// address (lease.go).
	leases map[string]*lease
	peers  map[string]*peer // other nodes this node has talked to

	memo walkMemo

	// closedFlag is closed, readable without mu (set under it).
	closedFlag atomic.Bool

	lostHolders atomic.Int64 // proxies dropped because their node was lost
	// sending counts the one-way messages (Release, Abort, Drop) still
	// being delivered (outbox.go); Close waits for them.
	sending atomic.Int64
	// undelivered counts the one-way messages given up (see Stats).
	undelivered atomic.Int64
}

// Stats are a node's counters.
type Stats struct {
	// LostHolders counts the holders of other nodes whose locks this node
	// dropped because their node was lost or restarted.
	LostHolders int64
	// Undelivered counts the one-way messages (Release, Abort, Drop) this
	// node gave up on: not acknowledged within 30 s of their first try,
	// or tried once while the node was closing. None is refused for lack
	// of room: a holder's releases to a node wait merged in one entry.
	Undelivered int64
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{LostHolders: n.lostHolders.Load(), Undelivered: n.undelivered.Load()}
}

func newIncarnation() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// Incarnation returns the random id this node drew at start. A node that
// restarts at the same address has a new one.
func (n *Node) Incarnation() uint64 { return n.inc }

// Addr returns the address other nodes reach this node at ("" for a node
// with no server).
func (n *Node) Addr() string { return n.cfg.Addr }

// NewHolder makes a holder on this node. Everything it holds, on every
// node, is released when it is closed or when ctx ends. It fails with
// ErrClosed once the node is closed.
func (n *Node) NewHolder(ctx context.Context) (*Holder, error) {
	h := &Holder{n: n, o: newOwner(OwnerID{Node: n.inc, Seq: n.seq.Add(1)}, time.Now().UnixNano(), "")}
	h.life, h.end = context.WithCancel(context.Background())
	h.ans = make(chan verdict, 1)
	h.stop = context.AfterFunc(ctx, func() { h.Close() })
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		h.stop()
		h.end()
		return nil, ErrClosed
	}
	// Close ends life before it takes n.mu to forget the holder: one that
	// ctx closed already is not kept.
	if h.life.Err() == nil {
		n.holders[h.o.id] = h
	}
	return h, nil
}

// Close stops the node. Its holders are closed (their requests end with
// ErrClosed and what they hold on other nodes is given back), the
// releases still on their way to other nodes are delivered (for up to
// NodeTimeout), and from then on its lock service refuses requests and
// answers Ping as a node that ended, so the other nodes drop what its
// holders still hold there at once. The proxies of other nodes' holders
// are dropped and the node's goroutines are stopped.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.closedFlag.Store(true)
	holders := make([]*Holder, 0, len(n.holders))
	for _, h := range n.holders {
		holders = append(holders, h)
	}
	n.mu.Unlock()
	for _, h := range holders {
		h.Close()
	}
	// The last Drops and Releases are what frees this node's locks on
	// the others: deliver them before the sends are cut.
	deadline := time.Now().Add(n.cfg.NodeTimeout)
	for n.sendsInFlight() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	n.mu.Lock()
	n.stopped = true
	proxies := n.proxies
	n.proxies = map[OwnerID]*owner{}
	n.byOrigin = originIndex{}
	n.live = map[string]*originLive{}
	leases := n.leases
	n.mu.Unlock()
	n.cancel()
	for _, l := range leases {
		l.stop()
	}
	for _, o := range proxies {
		o.drop(n.table)
	}
	n.wg.Wait()
	return nil
}

func (n *Node) sendsInFlight() int64 {
	return n.sending.Load()
}

// isClosed reports whether Close began. Every request asks: an atomic,
// not a read lock of n.mu that every core would write to.
func (n *Node) isClosed() bool {
	return n.closedFlag.Load()
}
