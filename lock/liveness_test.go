package lock

import (
	"context"
	"testing"
	"time"
)

// A node dies while its holders hold locks on another node: the other node
// frees them within its NodeTimeout (plus a ping period and slack).
func TestLostNodeHoldersLocksFreed(t *testing.T) {
	a, killA := serveNodeKill(t)
	b := serveNode(t)
	ctx := context.Background()
	h := newHolder(t, a)
	if err := h.LockOn(ctx, []string{a.Addr(), b.Addr()}, Exclusive, "x", "y"); err != nil {
		t.Fatal(err)
	}
	if err := h.LockOn(ctx, []string{b.Addr()}, Shared, "z"); err != nil {
		t.Fatal(err)
	}
	waiter := newHolder(t, b)
	wch := lockAsync(ctx, waiter, Exclusive, "y")
	eventually(t, "waiter queued on b", func() bool { _, _, q := b.table.snapshot("y"); return q == 1 })
	killed := time.Now()
	killA()
	if err := recv(t, wch, "waiter behind a lost node's holder"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	eventually(t, "x and z free on b", func() bool { return freeOn(b, "x") && freeOn(b, "z") })
	t.Logf("locks of the lost node's holder freed after %v (NodeTimeout %v)", took, b.cfg.NodeTimeout)
	if took > b.cfg.NodeTimeout+b.cfg.NodeTimeout/2+time.Second {
		t.Errorf("freed after %v, want within NodeTimeout %v plus a ping period and 1 s", took, b.cfg.NodeTimeout)
	}
	if got := b.Stats().LostHolders; got != 1 {
		t.Errorf("LostHolders = %d, want 1", got)
	}
}

// A node that answers with another incarnation restarted: the holders of
// its old incarnation are gone, and their locks with them.
func TestRestartedNodeHoldersLocksFreed(t *testing.T) {
	a, killA := serveNodeKill(t)
	b := serveNode(t)
	ctx := context.Background()
	h := newHolder(t, a)
	if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	addr := a.Addr()
	killA()
	// The node comes back at once at the same address, with a new
	// incarnation: b learns it from the next Ping reply.
	var a2 *Node
	eventually(t, "a restarted at "+addr, func() bool {
		n, kill, err := startNode(addr)
		if err != nil {
			return false // the port may not be free yet
		}
		t.Cleanup(kill)
		a2 = n
		return true
	})
	if a2.Incarnation() == a.Incarnation() {
		t.Fatal("restart kept the incarnation")
	}
	eventually(t, "k free on b", func() bool { return freeOn(b, "k") })
}
