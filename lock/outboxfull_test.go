package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// gateTransport holds back the Release calls until its gate opens (or
// their context ends), as a node that acknowledges releases slower than
// they come. It has no Go, so the sender has at most syncInFlightLimit of
// them in flight and the rest wait in the outbox.
type gateTransport struct {
	Transport
	gate chan struct{}
	once sync.Once
}

func (g *gateTransport) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gateTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if sm == "Release" {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Transport.Call(ctx, addr, sp, sm, args, reply)
}

// outboxLen returns how many entries wait in n's outbox for addr.
func outboxLen(n *Node, addr string) int {
	n.mu.RLock()
	p := n.peers[addr]
	n.mu.RUnlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// TestReleasesFasterThanAcknowledgedAreKept: a node that releases keys on
// another node faster than that node acknowledges (here: its Release
// calls are held back) loses none of them. The outbox keeps, per holder
// and node, the keys not yet acknowledged, one entry for them, so it holds
// at most one entry per holder however many releases wait; when the node
// answers again every key is free there and nothing was given up.
func TestReleasesFasterThanAcknowledgedAreKept(t *testing.T) {
	var gt *gateTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		// No linger: every release is a message of its own to send.
		c.ReleaseLinger = -1
		gt = &gateTransport{Transport: c.Transport, gate: make(chan struct{})}
		c.Transport = gt
	})
	defer gt.open()
	b, _, _ := nodeWith(t, false, nil)
	const holders, rounds = 100, 6
	ctx := context.Background()
	nodes := []string{b.Addr()}
	key := func(i, j int) string { return fmt.Sprint("k", i, "-", j) }
	hs := make([]*Holder, holders)
	for i := range hs {
		hs[i] = testHolder(t, a)
	}
	// Round by round, so that every holder has a release waiting when
	// the next round's request carries it.
	for j := range rounds {
		for i, h := range hs {
			if err := h.LockOn(ctx, nodes, Exclusive, key(i, j)); err != nil {
				t.Fatal(err)
			}
			if j == rounds-1 && i%2 == 1 {
				h.ReleaseAll()
			} else {
				h.Release(key(i, j))
			}
		}
	}
	// syncInFlightLimit (64) calls are held back in flight; the rest
	// waits.
	if q := outboxLen(a, b.Addr()); q > holders {
		t.Errorf("%d entries wait in the outbox for %d holders' releases: want at most one per holder", q, holders)
	}
	gt.open()
	eventually(t, "every key free on b", func() bool {
		for i := range holders {
			for j := range rounds {
				if !freeOn(b, key(i, j)) {
					return false
				}
			}
		}
		return true
	})
	eventually(t, "every release acknowledged", func() bool { return a.sendsInFlight() == 0 })
	if u := a.Stats().Undelivered; u != 0 {
		t.Fatalf("%d messages given up while the node was alive", u)
	}
}

// lossyTransport loses every Acquire: one whose key ends in "lost-request"
// before it reaches the node, the others after the node answered (the
// reply is lost). Abort calls wait for its gate, as to a node that
// acknowledges slower than requests fail.
type lossyTransport struct {
	gateTransport
}

func (l *lossyTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	switch sm {
	case "Acquire":
		a := args.(*AcquireArgs)
		if !strings.HasSuffix(a.Keys[0], "lost-request") {
			_ = l.Transport.Call(ctx, addr, sp, sm, args, reply)
		}
		return errFailed
	case "Abort":
		select {
		case <-l.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.Transport.Call(ctx, addr, sp, sm, args, reply)
}

// TestFailedRequestsAreWithdrawnInOneAbort: the withdrawals of a holder's
// failed requests to a node wait merged, one entry per holder, and one
// Abort withdraws them all: what the failed requests took there is given
// back, including the grant of a request that no later request reached
// the node to undo.
func TestFailedRequestsAreWithdrawnInOneAbort(t *testing.T) {
	var lt *lossyTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		lt = &lossyTransport{gateTransport{Transport: c.Transport, gate: make(chan struct{})}}
		c.Transport = lt
	})
	defer lt.open()
	b, _, _ := nodeWith(t, false, nil)
	const holders, rounds = 100, 4
	ctx := context.Background()
	nodes := []string{b.Addr()}
	// The last round's requests never reach b; the others are granted
	// there and their replies lost.
	key := func(i, j int) string {
		if j == rounds-1 {
			return fmt.Sprint("k", i, "-", j, "-lost-request")
		}
		return fmt.Sprint("k", i, "-", j)
	}
	hs := make([]*Holder, holders)
	for i := range hs {
		hs[i] = testHolder(t, a)
	}
	for j := range rounds {
		for i, h := range hs {
			if err := h.LockOn(ctx, nodes, Exclusive, key(i, j)); !errors.Is(err, ErrNodeLost) {
				t.Fatalf("LockOn whose reply is lost: %v, want ErrNodeLost", err)
			}
		}
	}
	if q := outboxLen(a, b.Addr()); q > holders {
		t.Errorf("%d entries wait in the outbox for %d holders' failed requests: want at most one per holder", q, holders)
	}
	lt.open()
	eventually(t, "every key free on b", func() bool {
		for i := range holders {
			for j := range rounds {
				if !freeOn(b, key(i, j)) {
					return false
				}
			}
		}
		return true
	})
	eventually(t, "every Abort acknowledged", func() bool { return a.sendsInFlight() == 0 })
	if u := a.Stats().Undelivered; u != 0 {
		t.Fatalf("%d messages given up while the node was alive", u)
	}
}
