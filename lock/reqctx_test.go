package lock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestRequestContextReusedWhileRequestsSucceed: a holder that locks on
// another node in a loop under one context makes its request context once;
// a request under another context makes a new one and ends the old one
// (nothing is left registered with the old caller's context), and Close
// ends the last.
func TestRequestContextReusedWhileRequestsSucceed(t *testing.T) {
	a, b := servePair(t, false)
	h := testHolder(t, a)
	nodes := []string{a.Addr(), b.Addr()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first context.Context
	for i := range 3 {
		if err := h.LockOn(ctx, nodes, Exclusive, "k"); err != nil {
			t.Fatal(err)
		}
		h.Release("k")
		h.mu.Lock()
		got := h.rq.ctx
		h.mu.Unlock()
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("request %d made a new context under the same caller context", i+1)
		}
	}
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	if err := h.LockOn(other, nodes, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	h.Release("k")
	if first.Err() == nil {
		t.Fatal("the request context of the first caller context was not ended when the holder moved to another")
	}
	h.mu.Lock()
	last := h.rq.ctx
	h.mu.Unlock()
	if last == first || last.Err() != nil {
		t.Fatalf("request under another context: reused %v, ended %v; want a new live context", last == first, last.Err())
	}
	h.Close()
	if last.Err() == nil {
		t.Fatal("Close did not end the holder's request context")
	}
}

// tagCtx is a caller context whose type cannot be compared with ==.
type tagCtx struct {
	context.Context
	tags []string
}

// TestUncomparableCallerContext: a caller context of a type that == cannot
// compare (a struct value holding a slice) works like any other: the
// holder does not compare it with its last one (that would panic).
func TestUncomparableCallerContext(t *testing.T) {
	a, b := servePair(t, false)
	h := testHolder(t, a)
	nodes := []string{a.Addr(), b.Addr()}
	ctx := tagCtx{Context: context.Background(), tags: []string{"x"}}
	for range 3 {
		if err := h.LockOn(ctx, nodes, Exclusive, "k"); err != nil {
			t.Fatal(err)
		}
		h.Release("k")
	}
}

// TestCloseEndsAWaitUnderAReusedContext: Close ends a request that waits
// on another node under the context the holder's earlier requests used.
func TestCloseEndsAWaitUnderAReusedContext(t *testing.T) {
	a, b := servePair(t, false)
	nodes := []string{b.Addr()}
	owner := testHolder(t, a)
	if err := owner.LockOn(context.Background(), nodes, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	h := testHolder(t, a)
	ctx := context.Background()
	if err := h.LockOn(ctx, nodes, Exclusive, "other"); err != nil {
		t.Fatal(err)
	}
	ch := lockOnAsync(ctx, h, nodes, Exclusive, "k")
	eventually(t, "the request queued on b", queuedAtLeast(b, "k", 1))
	h.Close()
	if err := recv(t, ch, "LockOn after Close"); !errors.Is(err, ErrClosed) {
		t.Fatalf("LockOn ended by Close: %v, want ErrClosed", err)
	}
	eventually(t, "other free on b", func() bool { return freeOn(b, "other") })
}

// keepTransport fails one Acquire call without sending it, keeping its
// arguments, as a call whose lane still holds it for encoding.
type keepTransport struct {
	Transport
	mu   sync.Mutex
	fail bool
	kept *AcquireArgs
}

func (k *keepTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	k.mu.Lock()
	if sm == "Acquire" && k.fail {
		k.fail = false
		k.kept = args.(*AcquireArgs)
		k.mu.Unlock()
		return errFailed
	}
	k.mu.Unlock()
	return k.Transport.Call(ctx, addr, sp, sm, args, reply)
}

// TestFailedCallArgumentsAreLeftAlone: the arguments of an Acquire call
// that failed (the transport may still read them) are not reused or
// changed by the holder's later requests; those of calls that got their
// reply are.
func TestFailedCallArgumentsAreLeftAlone(t *testing.T) {
	var kt *keepTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.ReleaseLinger = time.Hour
		kt = &keepTransport{Transport: c.Transport}
		c.Transport = kt
	})
	b, _, _ := nodeWith(t, false, nil)
	nodes := []string{b.Addr()}
	h := testHolder(t, a)
	ctx := context.Background()
	// k0 stays held on b: the releases then travel as a list of keys.
	for _, k := range []string{"k0", "k1"} {
		if err := h.LockOn(ctx, nodes, Exclusive, k); err != nil {
			t.Fatal(err)
		}
	}
	h.Release("k1")
	kt.mu.Lock()
	kt.fail = true
	kt.mu.Unlock()
	if err := h.LockOn(ctx, nodes, Exclusive, "k2"); !errors.Is(err, ErrNodeLost) {
		t.Fatalf("LockOn whose call failed: %v, want ErrNodeLost", err)
	}
	kt.mu.Lock()
	kept := kt.kept
	kt.mu.Unlock()
	if kept == nil {
		t.Fatal("the failing call was not made")
	}
	want := *kept
	want.Keys, want.Released = slices.Clone(kept.Keys), slices.Clone(kept.Released)
	if !slices.Equal(want.Keys, []string{"k2"}) || !slices.Equal(want.Released, []string{"k1"}) {
		t.Fatalf("failed call carried keys %v, released %v; want [k2] and [k1]", want.Keys, want.Released)
	}
	for _, k := range []string{"k3", "k4", "k5"} {
		if err := h.LockOn(ctx, nodes, Exclusive, k); err != nil {
			t.Fatal(err)
		}
		h.Release(k)
	}
	if kept.Seq != want.Seq || !slices.Equal(kept.Keys, want.Keys) || !slices.Equal(kept.Released, want.Released) {
		t.Fatalf("the failed call's arguments changed under the transport: seq %d keys %v released %v; were seq %d keys %v released %v",
			kept.Seq, kept.Keys, kept.Released, want.Seq, want.Keys, want.Released)
	}
	h.ReleaseAll()
	for _, k := range []string{"k0", "k1", "k2", "k3", "k4", "k5"} {
		eventually(t, k+" free on b", func() bool { return freeOn(b, k) })
	}
}
