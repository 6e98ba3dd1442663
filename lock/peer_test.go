package lock

import (
	"context"
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

// A release to a node whose peer's sender ended idle goes through a new
// one, not into the queue of a sender that is gone, where it would wait
// for good and the key would stay held on the other node. (A holder that
// kept the peer of its last release there, to spare the lookup, got this
// wrong: this test failed on it.)
func TestReleaseAfterIdlePeerIsForgotten(t *testing.T) {
	a, b := servePairTimeout(t, false, 100*time.Millisecond)
	h := newHolder(t, a)
	nodes := []string{a.Addr(), b.Addr()}
	ctx := context.Background()
	peers := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.peers)
	}
	for i, key := range []string{"k1", "k2"} {
		if err := h.LockOn(ctx, nodes, Exclusive, key); err != nil {
			t.Fatalf("lock %s: %v", key, err)
		}
		h.Release(key)
		if !waitFor(func() bool { return freeOn(b, key) }) {
			t.Fatalf("round %d: %s still held on the other node after the holder released it: %s", i, key, dump(b, key))
		}
		if i == 0 && !waitFor(func() bool { return peers() == 0 }) {
			t.Fatalf("the peer idle for %v is still kept (%d peers)", 4*100*time.Millisecond, peers())
		}
	}
}
