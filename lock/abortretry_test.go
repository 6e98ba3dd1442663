package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 32, items 1 and 5: an Abort that undoes a failed request on the
// other node races with the holder's immediate retry there. Nothing is
// injected: two nodes over rpcxbatch on loopback, one holder, and a
// failed request's Abort (sent the moment the request fails) followed at
// once by the retry. The failed request touches many keys, so that the
// Abort's work on the lock table takes a while, and the retry arrives
// while it runs.

// abortRig is the picture of those tests: nodes b < a (a multi-node
// request asks b first), holder h of a holding "gate" Shared on a beside
// reader r, so that any request of h's that asks "gate" Exclusive on a
// fails there at once (ErrUpgrade) after b granted it.
type abortRig struct {
	a, b *Node
	h    *Holder
	keys []string
}

func newAbortRig(t *testing.T, nkeys int) *abortRig {
	t.Helper()
	a, _, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	if b.Addr() > a.Addr() {
		a, b = b, a
	}
	ctx := context.Background()
	h, r := testHolder(t, a), testHolder(t, a)
	for _, x := range []*Holder{h, r} {
		if err := x.Lock(ctx, Shared, "gate"); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	return &abortRig{a: a, b: b, h: h, keys: keys}
}

// fail runs a request of h's for keys Exclusive on both nodes that b
// grants and a refuses: its Abort to b is on its way when it returns.
func (g *abortRig) fail(t *testing.T) {
	t.Helper()
	err := g.h.LockOn(context.Background(), []string{g.a.Addr(), g.b.Addr()}, Exclusive, append([]string{"gate"}, g.keys...)...)
	if !errors.Is(err, ErrUpgrade) {
		t.Fatalf("the request set up to fail on a: %v, want ErrUpgrade", err)
	}
}

// delivered waits until a's one-way messages (the Abort) are acknowledged
// by b: b's handler returned.
func (g *abortRig) delivered(t *testing.T) {
	t.Helper()
	if !waitFor(func() bool { return g.a.sendsInFlight() == 0 }) {
		t.Fatal("a's Abort to b was not acknowledged in 10 s")
	}
}

// rows describes the rows of keys on b that are not held Exclusive by h
// alone.
func (g *abortRig) notExclusive() []string {
	g.b.mu.RLock()
	o := g.b.proxies[g.h.ID()]
	g.b.mu.RUnlock()
	var bad []string
	for _, k := range g.keys {
		s, hh := g.b.table.shard(k)
		s.mu.Lock()
		r := s.rows.get(hh, k)
		ok := r != nil && r.mode == Exclusive && len(r.owners) == 1 && r.owners[0] == o
		s.mu.Unlock()
		if !ok {
			bad = append(bad, k+": "+dump(g.b, k))
		}
	}
	return bad
}

// Item 1: h holds the keys Shared on b. Its request for them Exclusive
// (an upgrade on b) fails on a; the Abort downgrades them on b, and h's
// retry upgrades them again and is told Exclusive. The Abort's undo must
// not downgrade a key after the retry upgraded it: the row would be
// Shared while h was told Exclusive, and a reader would join beside it.
func TestAbortDoesNotDowngradeARetriedUpgrade(t *testing.T) {
	g := newAbortRig(t, 200)
	ctx := context.Background()
	nodes := []string{g.b.Addr()}
	start := time.Now()
	rounds := 0
	for ; rounds < 400 && time.Since(start) < 20*time.Second; rounds++ {
		if err := g.h.LockOn(ctx, nodes, Shared, g.keys...); err != nil {
			t.Fatal(err)
		}
		g.fail(t)
		if err := g.h.LockOn(ctx, nodes, Exclusive, g.keys...); err != nil {
			t.Fatalf("round %d: the retry: %v", rounds, err)
		}
		g.delivered(t)
		if bad := g.notExclusive(); len(bad) > 0 {
			t.Fatalf("round %d: h was told Exclusive on b for %d keys, but after the failed request's Abort %d of them are not held Exclusive by h alone there; first: %s", rounds, len(g.keys), len(bad), bad[0])
		}
		g.h.Release(g.keys...)
	}
	t.Logf("%d rounds in %v", rounds, time.Since(start))
}

// Item 5: the failed request took the keys on b (h held none of them);
// the Abort gives them back there, and h's retry asks for them again. The
// retry must not find its own half-released hold in the table (the key
// gone from h's books there, not yet from the row), queue behind it, and
// fail as a cycle of one.
func TestRetryDoesNotWaitForItsOwnHalfReleasedHold(t *testing.T) {
	g := newAbortRig(t, 200)
	ctx := context.Background()
	nodes := []string{g.b.Addr()}
	start := time.Now()
	rounds := 0
	for ; rounds < 400 && time.Since(start) < 20*time.Second; rounds++ {
		g.fail(t)
		// Reversed: the keys the Abort gives back last come first.
		keys := slices.Clone(g.keys)
		slices.Reverse(keys)
		if err := g.h.LockOn(ctx, nodes, Exclusive, keys...); err != nil {
			t.Fatalf("round %d: the retry of keys the failed request took (its Abort on its way): %v", rounds, err)
		}
		g.delivered(t)
		if bad := g.notExclusive(); len(bad) > 0 {
			t.Fatalf("round %d: after the retry and the Abort, %d keys are not held Exclusive by h alone on b; first: %s", rounds, len(bad), strings.Join(bad[:1], ""))
		}
		g.h.Release(g.keys...)
	}
	t.Logf("%d rounds in %v", rounds, time.Since(start))
}
