package lock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// staleLinger is the ReleaseLinger of the tests below: long, so that the
// window in which the other node still shows a released hold is wide.
const staleLinger = 1500 * time.Millisecond

// lingerPair starts two nodes with ReleaseLinger staleLinger, sorted by
// address: every multi-node request asks a first.
func lingerPair(t *testing.T) (a, b *Node) {
	t.Helper()
	var nodes []*Node
	for range 2 {
		n, _, _ := nodeWith(t, false, func(c *Config) { c.ReleaseLinger = staleLinger })
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(x, y *Node) int { return strings.Compare(x.Addr(), y.Addr()) })
	return nodes[0], nodes[1]
}

// staleCycle sets up issue 15's picture on two nodes a < b. Y (of a) held
// k on both and released it when released is set: a gives it back at
// once, b keeps showing Y's hold while the release lingers. X (of a)
// holds k2 on a. Y asks k2 on both (a first, alone) and waits for X on
// a; X asks k on b, where it waits for Y's hold. In order yFirst, Y
// waits first, and X's walk, started on b, finds the cycle through Y's
// node. Otherwise X waits first, and Y, which then holds m on a so that
// its own wait walks, finds it on b, where its walk comes back to it.
// It returns X's and Y's results.
func staleCycle(t *testing.T, ctx context.Context, a, b *Node, released, yFirst bool) (x, y *Holder, ex, ey chan error) {
	t.Helper()
	both := []string{a.Addr(), b.Addr()}
	y = testHolder(t, a)
	x = testHolder(t, a)
	if err := y.LockOn(ctx, both, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	if released {
		y.Release("k")
		if !freeOn(a, "k") || freeOn(b, "k") {
			t.Fatalf("after Y's release: k on a: %s, on b: %s; want free on a, still shown held on b (its release lingers)", dump(a, "k"), dump(b, "k"))
		}
	}
	if err := x.Lock(ctx, Exclusive, "k2"); err != nil {
		t.Fatal(err)
	}
	if yFirst {
		ey = lockOnAsync(ctx, y, both, Exclusive, "k2")
		if !waitFor(queuedAtLeast(a, "k2", 1)) {
			t.Fatalf("Y did not queue for k2 on a: %s", dump(a, "k2"))
		}
		ex = lockOnAsync(ctx, x, []string{b.Addr()}, Exclusive, "k")
		return x, y, ex, ey
	}
	if err := y.Lock(ctx, Exclusive, "m"); err != nil {
		t.Fatal(err)
	}
	ex = lockOnAsync(ctx, x, []string{b.Addr()}, Exclusive, "k")
	if !waitFor(queuedAtLeast(b, "k", 1)) {
		t.Fatalf("X did not queue for k on b: %s", dump(b, "k"))
	}
	ey = lockOnAsync(ctx, y, both, Exclusive, "k2")
	return x, y, ex, ey
}

// orders are staleCycle's two orders, by name.
var orders = []struct {
	name   string
	yFirst bool
}{{"Y waits first", true}, {"X waits first", false}}

// TestLingeringReleaseMakesNoDeadlock is issue 15: Y released k before
// either wait, but its release to b lingers, so b still shows Y holding
// k: X waits there for Y while holding k2 on a, and Y waits on a for X.
// The nodes' state has the cycle X -> Y (k on b, stale) -> X (k2 on a),
// which the linger's timer breaks by itself. No request may fail with
// ErrDeadlock: X gets k on b when the release arrives, and once X lets
// k2 go, Y gets k2 on both. Before the fix, the walk that found the
// cycle (X's through a, or Y's on b) failed X's request, the younger
// holder's, with ErrDeadlock within milliseconds.
func TestLingeringReleaseMakesNoDeadlock(t *testing.T) {
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			a, b := lingerPair(t)
			ctx, cancel := context.WithTimeout(context.Background(), staleLinger+8*time.Second)
			defer cancel()
			start := time.Now()
			x, y, ex, ey := staleCycle(t, ctx, a, b, true, o.yFirst)
			var errX error
			select {
			case errX = <-ex:
			case errY := <-ey:
				t.Fatalf("Y's request returned while X held k2: %v (X's still waits)", errY)
			}
			if errX != nil {
				t.Fatalf("X's request for k on b, which Y released before either wait: %v; want it granted when Y's lingering release arrives", errX)
			}
			x.ReleaseAll()
			if err := <-ey; err != nil {
				t.Fatalf("Y's request for k2 on both after X released it: %v", err)
			}
			// Bound: the linger, then a few round trips; the context's
			// deadline (linger + 8 s) fails the requests well past it.
			if d := time.Since(start); d > staleLinger+5*time.Second {
				t.Fatalf("both locks took %v; want about the linger (%v)", d, staleLinger)
			}
			y.ReleaseAll()
		})
	}
}

// TestHeldKeyCycleStillDeadlocks is the same picture with Y still
// holding k on both nodes: a real cycle, which exactly one request
// leaves with ErrDeadlock, whichever walk finds it.
func TestHeldKeyCycleStillDeadlocks(t *testing.T) {
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			a, b := lingerPair(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			x, y, ex, ey := staleCycle(t, ctx, a, b, false, o.yFirst)
			if errX, errY, ok := oneLoser(x, y, ex, ey); !ok {
				t.Fatalf("a real cycle: want exactly one ErrDeadlock and the other request granted; X: %v; Y: %v", errX, errY)
			}
		})
	}
}

// TestCycleThroughAGrantInProgressDeadlocks: a hold that the holder's
// own node does not list yet, a grant of its request in progress, is a
// hold all the same. Nodes n0 < n1 < n2, holders of n0. X holds k on
// n2. Y asks k on n1 and n2: granted on n1 (its request in progress), it
// waits for X on n2. X asks k on n1 and waits for Y's grant there: a
// real cycle, which exactly one request leaves with ErrDeadlock. The
// walk reaches Y through that grant on n1 and asks n0, where Y's
// request has not ended: n0 must count the grant as Y's.
func TestCycleThroughAGrantInProgressDeadlocks(t *testing.T) {
	nodes := []*Node{serveNode(t), serveNode(t), serveNode(t)}
	slices.SortFunc(nodes, func(a, b *Node) int { return strings.Compare(a.Addr(), b.Addr()) })
	n0, n1, n2 := nodes[0], nodes[1], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x, y := testHolder(t, n0), testHolder(t, n0)
	if err := x.LockOn(ctx, []string{n2.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	ey := lockOnAsync(ctx, y, []string{n1.Addr(), n2.Addr()}, Exclusive, "k")
	if !waitFor(queuedAtLeast(n2, "k", 1)) {
		t.Fatalf("Y did not queue for k on n2: %s (n1: %s)", dump(n2, "k"), dump(n1, "k"))
	}
	ex := lockOnAsync(ctx, x, []string{n1.Addr()}, Exclusive, "k")
	if errX, errY, ok := oneLoser(x, y, ex, ey); !ok {
		t.Fatalf("a real cycle through a grant in progress: want exactly one ErrDeadlock and the other granted; X: %v; Y: %v", errX, errY)
	}
}

// oneLoser collects the results of x's and y's requests on a cycle; the
// loser lets go of what it holds, as ErrDeadlock asks, so that the other
// is granted. It reports whether exactly one failed, with ErrDeadlock.
func oneLoser(x, y *Holder, ex, ey chan error) (errX, errY error, ok bool) {
	select {
	case errX = <-ex:
		if errors.Is(errX, ErrDeadlock) {
			x.ReleaseAll()
		}
		errY = <-ey
	case errY = <-ey:
		if errors.Is(errY, ErrDeadlock) {
			y.ReleaseAll()
		}
		errX = <-ex
	}
	dX, dY := errors.Is(errX, ErrDeadlock), errors.Is(errY, ErrDeadlock)
	return errX, errY, dX != dY && (dX || errX == nil) && (dY || errY == nil)
}
