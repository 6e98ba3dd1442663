package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// cut makes n unable to reach any other node (its calls fail at once),
// and heal undoes it.
func cut(n *Node) (heal func()) {
	m := n.cfg.Transport.(*muteTransport)
	m.mute()
	return func() { m.muted.Store(false) }
}

// cutUntilLost cuts every node of nodes off the others until the test
// ends, and waits for h to be told it is lost, within 3 × nt (NodeTimeout):
// it returns when the cut was made and when h was told.
func cutUntilLost(t *testing.T, h *Holder, nt time.Duration, nodes ...*Node) (cutAt, lostAt time.Time) {
	t.Helper()
	for _, n := range nodes {
		t.Cleanup(cut(n))
	}
	cutAt = time.Now()
	select {
	case <-h.Lost():
		return cutAt, time.Now()
	case <-time.After(3 * nt):
		t.Fatal("holder not told within 3 × NodeTimeout of the cut")
		return
	}
}

// A partition between the holder's node a and node b, where the holder
// holds a lock: the holder is told (Lost, Context, ErrLockLost) before b
// drops the lock and grants it to b's waiter, by about LeaseMargin; its
// lock on its own node stays held.
func TestLeaseRunsOutBeforeOtherNodeDropsLocks(t *testing.T) {
	const nt = time.Second
	a, b := servePairTimeout(t, false, nt)
	ctx := context.Background()
	h := newHolder(t, a)
	if err := h.Lock(ctx, Exclusive, "local"); err != nil {
		t.Fatal(err)
	}
	if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	hctx := h.Context()
	// Renewed for a while first: the lease follows the pings, not the
	// grant.
	time.Sleep(2 * nt)
	select {
	case <-h.Lost():
		t.Fatalf("lost with both nodes up: %v", h.LostCause())
	default:
	}
	waiter := newHolder(t, b)
	wch := lockAsync(ctx, waiter, Exclusive, "k")
	eventually(t, "waiter queued on b", queuedAtLeast(b, "k", 1))

	cutAt, lostAt := cutUntilLost(t, h, nt, a, b)
	if err := recv(t, wch, "b's waiter"); err != nil {
		t.Fatal(err)
	}
	grantedAt := time.Now()
	t.Logf("cut at 0; holder lost at %v; b granted its waiter at %v (NodeTimeout %v, LeaseMargin %v)",
		lostAt.Sub(cutAt), grantedAt.Sub(cutAt), nt, a.cfg.LeaseMargin)
	if !lostAt.Before(grantedAt) {
		t.Fatalf("b granted the lock %v before the holder was told", lostAt.Sub(grantedAt))
	}
	// The lease ran from the last Ping b answered: at most a ping period
	// (NodeTimeout/8) and a Ping's timeout before the cut.
	if lease := nt - a.cfg.LeaseMargin; lostAt.Sub(cutAt) > lease+100*time.Millisecond {
		t.Errorf("holder told %v after the cut, want within the lease %v", lostAt.Sub(cutAt), lease)
	}
	if c := context.Cause(hctx); !errors.Is(c, ErrLockLost) {
		t.Errorf("holder's context cause %v, want ErrLockLost", c)
	}
	if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k2"); !errors.Is(err, ErrLockLost) {
		t.Errorf("LockOn of a lost holder: %v, want ErrLockLost", err)
	}
	if err := h.Lock(ctx, Exclusive, "local2"); !errors.Is(err, ErrLockLost) {
		t.Errorf("Lock of a lost holder: %v, want ErrLockLost", err)
	}
	if freeOn(a, "local") {
		t.Error("the lost holder's lock on its own node was dropped")
	}
	// Another holder of a, which holds nothing on b, is not lost.
	other := newHolder(t, a)
	if err := other.Lock(ctx, Exclusive, "x"); err != nil {
		t.Errorf("holder with local locks only: %v", err)
	}
	select {
	case <-other.Lost():
		t.Error("a holder with local locks only was told lost")
	default:
	}
}

// The other node cannot reach the holder's node, but the holder's node
// still reaches it (its Pings arrive): that is not a lost node, and the
// lock stays held on both sides.
func TestOneWayCutKeepsLocks(t *testing.T) {
	const nt = time.Second
	a, b := servePairTimeout(t, false, nt)
	ctx := context.Background()
	h := newHolder(t, a)
	if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	heal := cut(b)
	defer heal()
	time.Sleep(3 * nt)
	if freeOn(b, "k") {
		t.Fatal("b dropped the lock of a holder whose node still pings it")
	}
	select {
	case <-h.Lost():
		t.Fatalf("holder lost: %v", h.LostCause())
	default:
	}
}

// A LeaseMargin that leaves no lease is refused, naming the option.
func TestLeaseMarginLeavingNoLeaseRefused(t *testing.T) {
	for _, m := range []time.Duration{time.Second, 2 * time.Second, -time.Millisecond} {
		_, err := New(Config{NodeTimeout: time.Second, LeaseMargin: m})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("LeaseMargin %v with NodeTimeout 1s: %v, want ErrConfig", m, err)
		}
	}
	n, err := New(Config{NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.cfg.LeaseMargin != time.Second/DefaultLeaseMarginDivisor {
		t.Errorf("default LeaseMargin %v", n.cfg.LeaseMargin)
	}
}

// A holder lost while its Lock waits on its own node: the wait ends with
// ErrLockLost (the holder must not act on its locks any more, and a Lock
// that returned nil would say it may), the request leaves the queue, and
// the key, released by the holder before it, goes to nobody of the lost
// holder's.
func TestLostHolderLocalWaitEnds(t *testing.T) {
	const nt = time.Second
	a, b := servePairTimeout(t, false, nt)
	ctx := context.Background()
	h := newHolder(t, a)
	if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	first := newHolder(t, a)
	if err := first.Lock(ctx, Exclusive, "busy"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 6*nt)
	defer cancel()
	wch := lockAsync(wctx, h, Exclusive, "busy")
	eventually(t, "h queued on a", queuedAtLeast(a, "busy", 1))

	_, lostAt := cutUntilLost(t, h, nt, a, b)
	err := recv(t, wch, "the lost holder's waiting Lock")
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("waiting Lock of a holder lost %v ago: %v, want ErrLockLost", time.Since(lostAt), err)
	}
	if d := time.Since(lostAt); d > nt/2 {
		t.Errorf("the waiting Lock ended %v after Lost, want at once", d)
	}
	first.Release("busy")
	if !freeOn(a, "busy") {
		t.Errorf("after its only other holder released it, busy is held: %s", dump(a, "busy"))
	}
}
