package lock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
)

// countTransport counts the one-way Release messages a node sends.
type countTransport struct {
	Transport
	releases atomic.Int64
}

func (c *countTransport) note(sm string) {
	if sm == "Release" {
		c.releases.Add(1)
	}
}

func (c *countTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	c.note(sm)
	return c.Transport.Call(ctx, addr, sp, sm, args, reply)
}

func (c *countTransport) Go(ctx context.Context, addr, sp, sm string, args, reply any, done chan *client.Call) *client.Call {
	c.note(sm)
	return c.Transport.(asyncTransport).Go(ctx, addr, sp, sm, args, reply, done)
}

// TestReleaseRidesTheNextRequest: a holder that locks a key on two nodes
// and releases it, fifty times in a row, sends its releases to the other
// node inside its next request there (AcquireArgs.Released), not as a
// message each. The release after the last lock, which no request
// follows, still arrives on its own: every key is free on both nodes.
func TestReleaseRidesTheNextRequest(t *testing.T) {
	var ct *countTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		ct = &countTransport{Transport: c.Transport}
		c.Transport = ct
	})
	b, _, _ := nodeWith(t, false, nil)
	nodes := []string{a.Addr(), b.Addr()}
	h := testHolder(t, a)
	ctx := context.Background()
	const rounds = 50
	for i := range rounds {
		key := fmt.Sprint("k", i)
		if err := h.LockOn(ctx, nodes, Exclusive, key); err != nil {
			t.Fatal(err)
		}
		h.Release(key)
	}
	for i := range rounds {
		key := fmt.Sprint("k", i)
		eventually(t, key+" free on both nodes", func() bool { return freeOn(a, key) && freeOn(b, key) })
	}
	// Only the last release has no request to ride; one more for a
	// request that was slow to follow is allowed, on a busy machine.
	if n := ct.releases.Load(); n > 5 {
		t.Fatalf("%d Release messages for %d locks released on the other node: want the releases to ride the next request", n, rounds)
	}
	if got := a.Stats().Undelivered; got != 0 {
		t.Fatalf("%d messages undelivered", got)
	}
}

// failTransport fails the Acquire calls while failing is set, as a lane
// lost before the request reached the other node.
type failTransport struct {
	Transport
	failing atomic.Bool
}

var errFailed = errors.New("test: the call was lost before it reached the node")

func (f *failTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if sm == "Acquire" && f.failing.Load() {
		return errFailed
	}
	return f.Transport.Call(ctx, addr, sp, sm, args, reply)
}

func (f *failTransport) Go(ctx context.Context, addr, sp, sm string, args, reply any, done chan *client.Call) *client.Call {
	return f.Transport.(asyncTransport).Go(ctx, addr, sp, sm, args, reply, done)
}

// TestReleaseCarriedByAFailedRequestStillArrives: a release waiting to
// ride the holder's next request to the other node is not lost when that
// request fails before the node saw it: the key is free there soon,
// though the holder makes no further request.
func TestReleaseCarriedByAFailedRequestStillArrives(t *testing.T) {
	var ft *failTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.ReleaseLinger = time.Hour
		ft = &failTransport{Transport: c.Transport}
		c.Transport = ft
	})
	b, _, _ := nodeWith(t, false, nil)
	h := testHolder(t, a)
	if err := h.LockOn(context.Background(), []string{a.Addr(), b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	h.Release("k")
	if !freeOn(a, "k") || freeOn(b, "k") {
		t.Fatalf("after Release: k on a: %s, on b: %s; want free on a, still held on b (its release lingers)", dump(a, "k"), dump(b, "k"))
	}
	ft.failing.Store(true)
	if err := h.LockOn(context.Background(), []string{b.Addr()}, Exclusive, "other"); !errors.Is(err, ErrNodeLost) {
		t.Fatalf("LockOn whose call is lost: %v, want ErrNodeLost", err)
	}
	eventually(t, "k free on b", func() bool { return freeOn(b, "k") })
}

// TestReleaseLingersFromItsOwnTime: a release lingers ReleaseLinger from
// when it was made, also when the holder's previous release there, which
// a request carried, still has its place in the outbox: the next request,
// made after that earlier release's time but within the new one's, carries
// it, and no Release message goes.
func TestReleaseLingersFromItsOwnTime(t *testing.T) {
	const linger = 2 * time.Second
	var ct *countTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.ReleaseLinger = linger
		ct = &countTransport{Transport: c.Transport}
		c.Transport = ct
	})
	b, _, _ := nodeWith(t, false, nil)
	// On both nodes: a release lingers only for keys held here too.
	nodes := []string{a.Addr(), b.Addr()}
	h := testHolder(t, a)
	ctx := context.Background()
	lockRelease := func(key string) {
		t.Helper()
		if err := h.LockOn(ctx, nodes, Exclusive, key); err != nil {
			t.Fatal(err)
		}
		h.Release(key)
	}
	t0 := time.Now()
	lockRelease("k1")
	// k1's release rides this request; k2's release waits.
	lockRelease("k2")
	sleepUntil := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
	sleepUntil(linger * 3 / 4)
	if err := h.LockOn(ctx, nodes, Exclusive, "k4"); err != nil {
		t.Fatal(err)
	}
	h.Release("k4")
	// k1's time has passed; k4's has not (it was released at 3/4).
	sleepUntil(linger * 5 / 4)
	if err := h.LockOn(ctx, nodes, Exclusive, "k5"); err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) > linger*3/2 {
		t.Logf("the machine is too slow for this test's timing (%v); not checked", time.Since(t0))
		return
	}
	if n := ct.releases.Load(); n != 0 {
		t.Fatalf("%d Release messages sent: want k4's release, lingering from its own time, to ride the next request", n)
	}
	h.ReleaseAll() // does not linger
	eventually(t, "k5 free on both nodes", func() bool { return freeOn(a, "k5") && freeOn(b, "k5") })
}

// TestReleasedAllGivesBackTheOldHoldsOnly: a request to a node where the
// holder holds nothing any more says so (AcquireArgs.ReleasedAll) instead
// of listing its releases: the node gives back what the holder held there
// before, at once, and keeps what the request itself takes; a key still
// held there keeps the list.
func TestReleasedAllGivesBackTheOldHoldsOnly(t *testing.T) {
	var ct *countTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.ReleaseLinger = time.Hour
		ct = &countTransport{Transport: c.Transport}
		c.Transport = ct
	})
	b, _, _ := nodeWith(t, false, nil)
	nodes := []string{a.Addr(), b.Addr()}
	h := testHolder(t, a)
	ctx := context.Background()
	for _, k := range []string{"k1", "k2"} {
		if err := h.LockOn(ctx, nodes, Exclusive, k); err != nil {
			t.Fatal(err)
		}
	}
	h.Release("k1")
	h.Release("k2")
	if err := h.LockOn(ctx, nodes, Shared, "k3"); err != nil {
		t.Fatal(err)
	}
	if !freeOn(b, "k1") || !freeOn(b, "k2") || freeOn(b, "k3") {
		t.Fatalf("after the request that carried the releases: k1 %s, k2 %s, k3 %s on b; want k1 and k2 free, k3 held",
			dump(b, "k1"), dump(b, "k2"), dump(b, "k3"))
	}
	// k3 stays held: the next release goes as a list.
	if err := h.LockOn(ctx, nodes, Exclusive, "k4"); err != nil {
		t.Fatal(err)
	}
	h.Release("k4")
	if err := h.LockOn(ctx, nodes, Exclusive, "k5"); err != nil {
		t.Fatal(err)
	}
	if !freeOn(b, "k4") || freeOn(b, "k3") || freeOn(b, "k5") {
		t.Fatalf("k3 still held: k3 %s, k4 %s, k5 %s on b; want k3 and k5 held, k4 free", dump(b, "k3"), dump(b, "k4"), dump(b, "k5"))
	}
	if n := ct.releases.Load(); n != 0 {
		t.Fatalf("%d Release messages; want every release carried by the next request", n)
	}
	h.ReleaseAll()
	for _, k := range []string{"k3", "k5"} {
		eventually(t, k+" free on b", func() bool { return freeOn(b, k) })
	}
}

// Issue 32 (read, then proven): a holder's release of keys it holds only
// on another node lingers too: nobody waited for them here. A holder
// that comes back to that node within the linger sends its release
// inside its next request there, not as a message of its own.
func TestReleaseOfAKeyHeldOnlyElsewhereLingers(t *testing.T) {
	var ct *countTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		ct = &countTransport{Transport: c.Transport}
		c.Transport = ct
		c.ReleaseLinger = time.Second
	})
	b, _, _ := nodeWith(t, false, nil)
	h := testHolder(t, a)
	ctx := context.Background()
	const rounds = 10
	for i := range rounds {
		if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
		h.Release(fmt.Sprint("k", i))
		// Back within the linger, but not at once: a release sent at
		// once would be gone by then.
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "every key free on b", func() bool {
		for i := range rounds {
			if !freeOn(b, fmt.Sprint("k", i)) {
				return false
			}
		}
		return true
	})
	if got := ct.releases.Load(); got > 1 {
		t.Fatalf("%d Release messages for %d locks of keys held on b alone, each followed by the next request within ReleaseLinger; want 1 (the last release; the others ride the next request)", got, rounds)
	}
}
