package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A holder holds k Shared on a and b. It asks Exclusive on k and z on both
// nodes: b upgrades k and grants z; a upgrades k but z is held there, so
// the request fails by its deadline. The holder must keep what it held
// before: k Shared on b, so another reader on b gets k at once. b sorts
// first, so it is asked (and upgrades) first.
func TestFailedMultiNodeUpgradeIsUndoneRemotely(t *testing.T) {
	b, a := sortedNodes(t)
	both := []string{a.Addr(), b.Addr()}
	ctx := context.Background()
	h := testHolder(t, a)
	if err := h.LockOn(ctx, both, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	blocker := testHolder(t, a)
	if err := blocker.Lock(ctx, Exclusive, "z"); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := h.LockOn(dctx, both, Exclusive, "k", "z")
	dcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock k,z on both: got %v, want DeadlineExceeded", err)
	}
	time.Sleep(300 * time.Millisecond) // let the Abort land
	reader := testHolder(t, b)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := reader.Lock(rctx, Shared, "k"); err != nil {
		t.Fatalf("reader on b after the failed request: %v; row on b: %s", err, dump(b, "k"))
	}
}

// The same with the upgrade that succeeded on the holder's own node, a,
// which sorts first; b refuses the upgrade (another reader there).
func TestFailedMultiNodeUpgradeIsUndoneLocally(t *testing.T) {
	a, b := sortedNodes(t)
	both := []string{a.Addr(), b.Addr()}
	ctx := context.Background()
	h := testHolder(t, a)
	if err := h.LockOn(ctx, both, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	other := testHolder(t, b)
	if err := other.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	err := h.LockOn(ctx, both, Exclusive, "k")
	if !errors.Is(err, ErrUpgrade) {
		t.Fatalf("upgrade on both: got %v, want ErrUpgrade", err)
	}
	reader := testHolder(t, a)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := reader.Lock(rctx, Shared, "k"); err != nil {
		t.Fatalf("reader on a after the failed upgrade: %v; row on a: %s", err, dump(a, "k"))
	}
}

// sortedNodes starts two nodes and returns them in the order a multi-node
// request asks them in (by address).
func sortedNodes(t *testing.T) (*Node, *Node) {
	x, y := serveNode(t), serveNode(t)
	if y.Addr() < x.Addr() {
		x, y = y, x
	}
	return x, y
}
