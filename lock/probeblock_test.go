package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A node this node once asked is frozen (it accepts TCP connections but
// never answers, like a SIGSTOPped process). A purely local request that
// must wait while its holder holds something walks for deadlocks, and the
// walk casts a probe to every peer this node ever talked to, on the
// caller's goroutine and under the node's context, not the request's. The
// local request must still end by its own deadline.
func TestLocalWaitHonoursCtxWithFrozenPeer(t *testing.T) {
	a := serveNode(t)
	frozen := frozenAddr(t)
	ctx := context.Background()
	probe := testHolder(t, a)
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_ = probe.LockOn(pctx, []string{frozen}, Exclusive, "p") // makes frozen a peer of a
	pcancel()

	x := testHolder(t, a)
	if err := x.Lock(ctx, Exclusive, "x"); err != nil {
		t.Fatal(err)
	}
	h := testHolder(t, a)
	if err := h.Lock(ctx, Exclusive, "y"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err := h.Lock(lctx, Exclusive, "x")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("local lock: %v", err)
	}
	if took > time.Second {
		t.Fatalf("a local Lock with a 200 ms deadline returned after %v (frozen peer %s)", took, frozen)
	}
	t.Logf("returned after %v", took)
}
