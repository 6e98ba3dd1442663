package lock

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Three nodes N, W, O. Two holders of O: hb holds k1 on N, ha holds k2 on
// W. Then ha asks k1 on N and hb asks k2 on W: a cycle ha -> hb -> ha
// through N and W. N and W never talked to each other: the walk reaches
// the other node through the holders' home node O, which knows where its
// holders' requests wait. Exactly one request fails with ErrDeadlock.
func TestThreeNodeCycleIsDetected(t *testing.T) {
	nN, nW, nO := serveNode(t), serveNode(t), serveNode(t)
	ctx := context.Background()
	ha, hb := testHolder(t, nO), testHolder(t, nO)
	if os.Getenv("LOCKTEST_INTRODUCE") != "" {
		// Diagnosis: once N and W have talked, the same cycle is found.
		x := testHolder(t, nN)
		if err := x.LockOn(ctx, []string{nW.Addr()}, Exclusive, "intro"); err != nil {
			t.Fatal(err)
		}
		x.ReleaseAll()
	}
	if err := hb.LockOn(ctx, []string{nN.Addr()}, Exclusive, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := ha.LockOn(ctx, []string{nW.Addr()}, Exclusive, "k2"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	ea := lockOnAsync(wctx, ha, []string{nN.Addr()}, Exclusive, "k1")
	eb := lockOnAsync(wctx, hb, []string{nW.Addr()}, Exclusive, "k2")
	// The loser releases what it holds, as ErrDeadlock asks: then the
	// other request is granted.
	var errA, errB error
	select {
	case errA = <-ea:
		if errors.Is(errA, ErrDeadlock) {
			ha.ReleaseAll()
		}
		errB = <-eb
	case errB = <-eb:
		if errors.Is(errB, ErrDeadlock) {
			hb.ReleaseAll()
		}
		errA = <-ea
	}
	if !errors.Is(errA, ErrDeadlock) && !errors.Is(errB, ErrDeadlock) {
		t.Fatalf("a cycle over three nodes: no ErrDeadlock in 8 s (ProbeInterval %v): ha: %v; hb: %v",
			DefaultProbeInterval, errA, errB)
	}
	if errA != nil && errB != nil {
		t.Fatalf("both requests of the cycle failed (one loser expected): ha: %v; hb: %v", errA, errB)
	}
}

// Three nodes; N0 sorts first, so a request on all three is granted on N0
// before it asks N1 and N2 at once. X (of N1) holds k exclusive on N1; B
// (of N2) holds k exclusive on N2. A (of N1) asks k Shared on all three:
// granted on N0, it queues behind X on N1 and behind B on N2. Then B asks
// k Shared on N1: it queues behind A. B does not wait for A (two shared
// requests in a row are granted together when X leaves), so there is no
// cycle: when X releases, B gets k on N1, releases everything, and A gets
// k everywhere. A walk that reads "queued just behind A" as "waits for A"
// sees B -> A -> B and fails one of them with ErrDeadlock.
func TestNoFalseDeadlockBetweenSharedWaiters(t *testing.T) {
	nodes := []*Node{serveNode(t), serveNode(t), serveNode(t)}
	slices.SortFunc(nodes, func(a, b *Node) int { return strings.Compare(a.Addr(), b.Addr()) })
	n0, n1, n2 := nodes[0], nodes[1], nodes[2]
	ctx := context.Background()
	x := testHolder(t, n1)
	if err := x.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	hB := testHolder(t, n2)
	if err := hB.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	hA := testHolder(t, n1)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ea := lockOnAsync(wctx, hA, []string{n0.Addr(), n1.Addr(), n2.Addr()}, Shared, "k")
	if !waitFor(queuedAtLeast(n1, "k", 1)) || !waitFor(queuedAtLeast(n2, "k", 1)) {
		t.Fatalf("A did not queue: n1 %s; n2 %s", dump(n1, "k"), dump(n2, "k"))
	}
	eb := lockOnAsync(wctx, hB, []string{n1.Addr()}, Shared, "k")
	// B's request takes ticket 3 on n1 (X 1, A 2).
	if !waitFor(func() bool { return ticketOf(n1, "k") >= 3 }) {
		t.Fatalf("B did not reach n1: %s", dump(n1, "k"))
	}
	// Give the walks (at queueing and the periodic ones) time to run.
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-ea:
		t.Fatalf("A returned before X released: %v", err)
	case err := <-eb:
		t.Fatalf("B returned before X released: %v", err)
	default:
	}
	x.Release("k")
	if err := <-eb; err != nil {
		t.Fatalf("B's shared request on n1 after X released: %v", err)
	}
	hB.ReleaseAll()
	if err := <-ea; err != nil {
		t.Fatalf("A's shared request on all three after X and B released: %v", err)
	}
}

func ticketOf(n *Node, key string) uint64 {
	s, h := n.table.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rows.get(h, key); r != nil {
		return r.ticket
	}
	return 0
}
