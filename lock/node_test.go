package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Holders on two nodes lock keys on both nodes: the invariant holds across
// the cluster, and nothing is left behind.
func TestTwoNodeInvariantUnderContention(t *testing.T) {
	a, b := serveNode(t), serveNode(t)
	nodes := []string{a.Addr(), b.Addr()}
	const keys, workers, iters = 3, 16, 40
	g := newGrantBook(t, a, b)
	var wg sync.WaitGroup
	var rounds, deadlocks atomic.Int64
	stop := time.Now().Add(30 * time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			home := a
			if w%2 == 1 {
				home = b
			}
			h := newHolder(t, home)
			r := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; i < iters && time.Now().Before(stop); i++ {
				k := r.IntN(keys)
				m := Shared
				if r.IntN(2) == 0 {
					m = Exclusive
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := h.LockOn(ctx, nodes, m, fmt.Sprint("k", k))
				cancel()
				if errors.Is(err, ErrDeadlock) {
					// Two requests for one key on two nodes, each granted
					// on one: a real cycle. Retry.
					deadlocks.Add(1)
					i--
					continue
				}
				if err != nil {
					t.Errorf("lock on both nodes: %v", err)
					return
				}
				g.granted(h, nodes, m, fmt.Sprint("k", k))
				g.releasing(h)
				h.Release(fmt.Sprint("k", k))
				rounds.Add(1)
			}
		}(w)
	}
	wg.Wait()
	g.check()
	for k := range keys {
		key := fmt.Sprint("k", k)
		if !waitFor(func() bool { return freeOn(a, key) && freeOn(b, key) }) {
			t.Fatalf("%s left behind: on a: %s; on b: %s", key, dump(a, key), dump(b, key))
		}
	}
	t.Logf("%d two-node lock rounds, %d deadlocks retried", rounds.Load(), deadlocks.Load())
}

// A request on two nodes that one node cannot grant fails by its deadline
// and holds nothing anywhere.
func TestAllOrNothingFailsAndHoldsNothing(t *testing.T) {
	a, b := serveNode(t), serveNode(t)
	ctx := context.Background()
	blocker := newHolder(t, b)
	if err := blocker.Lock(ctx, Exclusive, "k2"); err != nil {
		t.Fatal(err)
	}
	h := newHolder(t, a)
	if err := h.LockOn(ctx, []string{a.Addr(), b.Addr()}, Shared, "mine"); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := h.LockOn(dctx, []string{a.Addr(), b.Addr()}, Exclusive, "k1", "k2")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked two-node request: %v, want DeadlineExceeded", err)
	}
	eventually(t, "k1 free on both nodes", func() bool { return freeOn(a, "k1") && freeOn(b, "k1") })
	eventually(t, "k2 only the blocker's", func() bool {
		_, hs, q := b.table.snapshot("k2")
		return hs == 1 && q == 0 && freeOn(a, "k2")
	})
	// What the holder held before is kept on both nodes.
	for _, n := range []*Node{a, b} {
		if m, hs, _ := n.table.snapshot("mine"); m != Shared || hs != 1 {
			t.Fatalf("holder lost \"mine\" on %s: %v %d", n.Addr(), m, hs)
		}
	}
	blocker.Release("k2")
	if err := h.LockOn(ctx, []string{a.Addr(), b.Addr()}, Exclusive, "k1", "k2"); err != nil {
		t.Fatalf("after the blocker left: %v", err)
	}
}

// A holder closed, or whose context ends, releases on every node.
func TestHolderDeathReleasesOnEveryNode(t *testing.T) {
	a, b := serveNode(t), serveNode(t)
	ctx := context.Background()
	hctx, hcancel := context.WithCancel(ctx)
	h, err := a.NewHolder(hctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LockOn(ctx, []string{a.Addr(), b.Addr()}, Exclusive, "x", "y"); err != nil {
		t.Fatal(err)
	}
	waiter := newHolder(t, b)
	wch := make(chan error, 1)
	go func() { wch <- waiter.LockOn(ctx, []string{a.Addr(), b.Addr()}, Exclusive, "y") }()
	// It queues on the first node of the cluster-wide order (LockOn).
	eventually(t, "waiter queued", func() bool {
		_, _, qa := a.table.snapshot("y")
		_, _, qb := b.table.snapshot("y")
		return qa+qb == 1
	})
	hcancel()
	if err := recv(t, wch, "waiter behind a dead holder"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "x free on both nodes", func() bool { return freeOn(a, "x") && freeOn(b, "x") })
	eventually(t, "dead holder's proxy gone", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		_, ok := b.proxies[h.ID()]
		return !ok
	})
}

// A two-node deadlock cycle: exactly one of the two requests fails with
// ErrDeadlock, the younger holder's; the other is granted once the loser
// releases.
func TestTwoNodeDeadlockExactlyOne(t *testing.T) {
	for _, tc := range []struct {
		name         string
		both         bool
		firstHolding string
	}{{"locks on both nodes", true, ""}, {"each lock on one node", false, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := serveNode(t), serveNode(t)
			ctx := context.Background()
			h1 := newHolder(t, a) // older
			h2 := newHolder(t, b) // younger
			on1, on2 := []string{a.Addr(), b.Addr()}, []string{a.Addr(), b.Addr()}
			if !tc.both {
				on1, on2 = []string{a.Addr()}, []string{b.Addr()}
			}
			if err := h1.LockOn(ctx, on1, Exclusive, "p"); err != nil {
				t.Fatal(err)
			}
			if err := h2.LockOn(ctx, on2, Exclusive, "q"); err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 2)
			go func() {
				err := h1.LockOn(ctx, on2, Exclusive, "q")
				if err != nil {
					h1.ReleaseAll()
				}
				errs <- err
			}()
			go func() {
				err := h2.LockOn(ctx, on1, Exclusive, "p")
				if err != nil {
					h2.ReleaseAll()
				}
				errs <- err
			}()
			var deadlocks, ok int
			for i := 0; i < 2; i++ {
				err := recv(t, errs, "a request of the cycle")
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrDeadlock):
					deadlocks++
				default:
					t.Fatalf("unexpected error: %v", err)
				}
			}
			if deadlocks != 1 || ok != 1 {
				t.Fatalf("%d deadlocks and %d grants, want exactly one of each", deadlocks, ok)
			}
		})
	}
}

// A holder closed while its request on two nodes waits: the request ends
// with ErrClosed and nothing is left anywhere.
func TestHolderClosedWhileRemoteRequestWaits(t *testing.T) {
	a, b := serveNode(t), serveNode(t)
	ctx := context.Background()
	blocker := newHolder(t, b)
	if err := blocker.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	h, err := a.NewHolder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- h.LockOn(ctx, []string{a.Addr(), b.Addr()}, Exclusive, "k") }()
	eventually(t, "queued on b", func() bool { _, _, q := b.table.snapshot("k"); return q == 1 })
	h.Close()
	if err := recv(t, errc, "request of a closed holder"); !errors.Is(err, ErrClosed) {
		t.Fatalf("request of a closed holder: %v, want ErrClosed", err)
	}
	eventually(t, "queue on b empty", func() bool { _, hs, q := b.table.snapshot("k"); return hs == 1 && q == 0 })
	if !freeOn(a, "k") {
		t.Fatal("k held on a")
	}
}
