package lock

import (
	"context"
	"testing"
	"time"
)

// token returns h's token for key, failing the test when h does not hold
// it.
func token(t *testing.T, h *Holder, key string) uint64 {
	t.Helper()
	tok, ok := h.Token(key)
	if !ok || tok == 0 {
		t.Fatalf("Token(%q) = %d, %v after a grant", key, tok, ok)
	}
	return tok
}

// A key's fencing tokens on a node grow from grant to grant: granted at
// once, granted after a wait (the verdict by Answer), locally, and across
// a restart of the node at the same address.
func TestTokenGrowsAcrossGrantsAndNodeRestart(t *testing.T) {
	a := serveNode(t)
	b, killB := serveNodeKill(t)
	addr := b.Addr()
	ctx := context.Background()
	var last, lastLocal uint64
	grow := func(what string, tok uint64, prev *uint64) {
		t.Helper()
		if tok <= *prev {
			t.Fatalf("%s: token %d, not above the key's last %d", what, tok, *prev)
		}
		*prev = tok
	}

	h1 := newHolder(t, a)
	if err := h1.LockOn(ctx, []string{addr}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	grow("remote grant", token(t, h1, "k"), &last)
	if tok, ok := h1.TokenOn(addr, "k"); !ok || tok != last {
		t.Fatalf("TokenOn = %d, %v, want %d", tok, ok, last)
	}
	// A grant after a wait: its token comes with the Answer.
	h2 := newHolder(t, a)
	ch := lockOnAsync(ctx, h2, []string{addr}, Exclusive, "k")
	eventually(t, "h2 queued on b", queuedAtLeast(b, "k", 1))
	h1.Release("k")
	if err := recv(t, ch, "h2's queued request"); err != nil {
		t.Fatal(err)
	}
	grow("grant after a wait", token(t, h2, "k"), &last)
	h2.Release("k")
	if _, ok := h2.Token("k"); ok {
		t.Fatal("Token of a released key reports held")
	}

	loc := newHolder(t, b)
	if err := loc.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	grow("local grant", token(t, loc, "k"), &lastLocal)
	if lastLocal <= last {
		t.Fatalf("local grant's token %d not above the remote grant's %d on the same node", lastLocal, last)
	}
	last = lastLocal
	loc.Release("k")

	killB()
	var b2 *Node
	eventually(t, "b restarted at "+addr, func() bool {
		n, kill, err := startNode(addr)
		if err != nil {
			return false
		}
		t.Cleanup(kill)
		b2 = n
		return true
	})
	h3 := newHolder(t, a)
	// b's restart may still be news to a: retry until b2 grants.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := h3.LockOn(ctx, []string{addr}, Exclusive, "k")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock on the restarted node: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	grow("grant after the node restarted", token(t, h3, "k"), &last)
	loc2 := newHolder(t, b2)
	if err := loc2.Lock(ctx, Exclusive, "j"); err != nil {
		t.Fatal(err)
	}
	grow("local grant after the restart", token(t, loc2, "j"), &lastLocal)
}

// A key held on two nodes: Token gives the first node's in address
// order, the same for every holder that locks it on those nodes.
func TestTokenOfKeyOnTwoNodesIsFirstNodes(t *testing.T) {
	a, b := servePair(t, false)
	first, second := a.Addr(), b.Addr()
	if second < first {
		first, second = second, first
	}
	h := newHolder(t, a)
	if err := h.LockOn(context.Background(), []string{a.Addr(), b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	t1, ok1 := h.TokenOn(first, "k")
	t2, ok2 := h.TokenOn(second, "k")
	if !ok1 || !ok2 || t1 == 0 || t2 == 0 {
		t.Fatalf("TokenOn: %d %v, %d %v", t1, ok1, t2, ok2)
	}
	if got := token(t, h, "k"); got != t1 {
		t.Fatalf("Token = %d, want the first node's %d (the second's is %d)", got, t1, t2)
	}
}
