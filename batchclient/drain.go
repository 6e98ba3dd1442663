package batchclient

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// ErrDraining is returned for an entry the client did not write because
// the server at its address has begun a graceful shutdown: the server did
// not run it. It is not an rpcx ServiceError, so rpcx's Failover retries
// the call on another server (and Failtry on the same one, once it is
// back); a caller of Client itself should retry it on another server.
// Calls written before the server began to drain get their replies.
var ErrDraining = lane.ErrDraining

// Draining. A server that begins a graceful shutdown sends a drain notice
// (codec.MethodDrain) on every connection and reads no more from them; it
// answers every entry it read. A lane that hears the notice stops writing,
// fails the entries still queued with ErrDraining, refuses new ones with
// it, and keeps reading until every call it wrote has its reply (drained)
// or the server closes the connection (then the calls it never read fail
// with ErrConnection, which rpcx's Failover retries as well). Its peer
// takes new calls off the pool at once (ErrPeerDown wrapping ErrDraining),
// waits for the pool to drain, and reconnects.

// drainPool is the peer's part of a drain: new calls fail over at once,
// the calls written to the pool get their replies, then the pool is closed
// and the manager reconnects. It reports false on Stop.
func (p *peer) drainPool(lanes []*lane.Lane) bool {
	p.env.drainMark(p.key)
	p.setState(stateDown, nil, fmt.Errorf("%w: %s", ErrDraining, p.addr))
	for _, l := range lanes {
		l.Drain()
	}
	for _, l := range lanes {
		select {
		case <-l.Dead():
		case <-l.Drained():
		case <-p.stop:
			for _, l := range lanes {
				l.Close(ErrStopped)
			}
			return false
		}
	}
	for _, l := range lanes {
		l.Close(fmt.Errorf("%w: %s", ErrDraining, p.addr))
	}
	return true
}

// drainRedialMax caps the reconnect backoff of a peer whose server shut
// down gracefully: most often it is being restarted, and the sooner the
// peer finds it again, the sooner it takes calls (it is out of the
// XClients' selection until then).
const drainRedialMax = 250 * time.Millisecond

// drainSet holds the addresses whose server has begun to shut down and
// has not been connected again since.
type drainSet struct {
	n  atomic.Int32 // len(m): the empty set is checked without the lock
	mu sync.Mutex   // guards m (and n's writes)
	m  map[string]struct{}
}

func (s *drainSet) mark(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]struct{})
	}
	s.m[addr] = struct{}{}
	s.n.Store(int32(len(s.m)))
}

func (s *drainSet) clear(addr string) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, addr)
	s.n.Store(int32(len(s.m)))
}

func (s *drainSet) has(addr string) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[addr]
	return ok
}
