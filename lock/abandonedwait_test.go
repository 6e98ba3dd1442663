package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Issue 32, item 2: a remote holder's wait that its holder gave up on is
// no wait-for edge, even while its Abort is still on its way. X, a holder
// of node a, holds k2 on b and waits on b for k1, which Y (a younger
// holder of b) holds. X gives up (its context is cancelled: b hears of it
// only by X's Abort). Y then asks for k2 on b and waits for X's hold
// there. There is no cycle: X waits for nothing any more. A walk that
// expands X's queued request on b without asking X's node reads the wait
// X gave up on, closes Y -> X -> Y, and fails Y (the younger) with
// ErrDeadlock.
//
// abandonedRound plays it once and returns Y's verdict: nil once X lets
// k2 go.
func abandonedRound(t *testing.T, a, b *Node) error {
	t.Helper()
	ctx := context.Background()
	x := testHolder(t, a)
	y := testHolder(t, b)
	defer x.Close()
	defer y.Close()
	if err := x.LockOn(ctx, []string{b.Addr()}, Exclusive, "k2"); err != nil {
		t.Fatal(err)
	}
	if err := y.Lock(ctx, Exclusive, "k1"); err != nil {
		t.Fatal(err)
	}
	xctx, cancel := context.WithCancel(ctx)
	xerr := lockOnAsync(xctx, x, []string{b.Addr()}, Exclusive, "k1")
	if !waitFor(queuedAtLeast(b, "k1", 1)) {
		t.Fatalf("X did not queue for k1 on b: %s", dump(b, "k1"))
	}
	cancel()
	if err := recv(t, xerr, "X's request"); !errors.Is(err, context.Canceled) {
		t.Fatalf("X's cancelled request: %v", err)
	}
	yctx, ycancel := context.WithTimeout(ctx, 10*time.Second)
	defer ycancel()
	yerr := lockAsync(yctx, y, Exclusive, "k2")
	// Y waits behind X's hold (and its walk, if any, has run) before X
	// lets k2 go.
	time.Sleep(300 * time.Millisecond)
	x.Release("k2")
	return recv(t, yerr, "Y's request")
}

// With X's Abort a second late (its first try lost, say), every round
// shows it.
func TestAbandonedRemoteWaitIsNoEdge(t *testing.T) {
	slow := func(c *Config) { c.Transport = delayAbort{c.Transport, time.Second} }
	a, _, _ := nodeWith(t, false, slow)
	b, _, _ := nodeWith(t, false, slow)
	for i := range 3 {
		if err := abandonedRound(t, a, b); err != nil {
			t.Fatalf("round %d: Y, waiting for a hold of X's that X keeps, failed (X's abandoned wait read as an edge): %v", i, err)
		}
	}
}

// End to end with nothing injected: two nodes over rpcxbatch on loopback,
// the Abort as fast as the transport takes it.
func TestAbandonedRemoteWaitIsNoEdgeUndelayed(t *testing.T) {
	a, _, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	rounds, deadlocks := 20, 0
	var first error
	for range rounds {
		if err := abandonedRound(t, a, b); err != nil {
			if !errors.Is(err, ErrDeadlock) {
				t.Fatalf("Y: %v", err)
			}
			deadlocks++
			first = err
		}
	}
	if deadlocks > 0 {
		t.Fatalf("%d of %d rounds failed Y with a deadlock that X's abandoned wait closed: %v", deadlocks, rounds, first)
	}
}
