package lock

import (
	"context"
	"errors"
	"net"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Accept and hold connections without a byte in reply.
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	frozen := ln.Addr().String()
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
	err = h.Lock(lctx, Exclusive, "x")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("local lock: %v", err)
	}
	if took > time.Second {
		t.Fatalf("a local Lock with a 200 ms deadline returned after %v (frozen peer %s)", took, frozen)
	}
	t.Logf("returned after %v", took)
}
