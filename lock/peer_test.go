package lock

import (
	"net"
	"testing"
	"time"
)

// A peer named once (here: a deadlock probe cast to a node that is gone)
// costs a sender goroutine only while it has work: after 4 × NodeTimeout
// idle it is forgotten.
func TestIdlePeerIsForgotten(t *testing.T) {
	n, kill, err := startNodeTimeout("127.0.0.1:0", false, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kill)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	n.castTo(dead, "Probe", &ProbeArgs{})
	peers := func() int {
		n.mu.Lock()
		defer n.mu.Unlock()
		return len(n.peers)
	}
	if peers() != 1 {
		t.Fatalf("peers after one cast: %d, want 1", peers())
	}
	if !waitFor(func() bool { return peers() == 0 }) {
		t.Fatalf("a peer idle for %v is still kept (%d peers)", 4*100*time.Millisecond, peers())
	}
}
