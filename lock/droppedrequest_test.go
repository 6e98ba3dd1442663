package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
)

// pauseTransport is a Transport whose calls, while paused, wait until the
// link resumes (or their context ends) and are sent then: a link whose
// bytes are held, not lost, as TCP holds them across a short outage.
type pauseTransport struct {
	Transport
	mu     sync.Mutex
	resume chan struct{} // nil: not paused
}

func (p *pauseTransport) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

func (p *pauseTransport) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// wait holds a call while the link is paused.
func (p *pauseTransport) wait(ctx context.Context) error {
	p.mu.Lock()
	ch := p.resume
	p.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pauseTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if err := p.wait(ctx); err != nil {
		return err
	}
	return p.Transport.Call(ctx, addr, sp, sm, args, reply)
}

func (p *pauseTransport) Cast(ctx context.Context, addr, sp, sm string, args any) error {
	if err := p.wait(ctx); err != nil {
		return err
	}
	return p.Transport.Cast(ctx, addr, sp, sm, args)
}

// Go passes the one-way messages on; the test sends none while paused.
func (p *pauseTransport) Go(ctx context.Context, addr, sp, sm string, args, reply any, done chan *client.Call) *client.Call {
	return p.Transport.(asyncTransport).Go(ctx, addr, sp, sm, args, reply, done)
}

// Issue 44, item 6: a request held across a pause of the links between
// the holder's node a and node b, long enough for b to drop a's holders
// (it heard nothing from a for NodeTimeout), reaches b once the links
// resume and is refused there: b keeps a tombstone of the dropped holder.
// The holder withdrew nothing, and holds nothing on b: the request was
// lost with the node, and fails with ErrNodeLost (before, with
// ErrAborted, "withdrawn by its holder", which no doc listed). It holds
// nothing anywhere after.
func TestRequestHeldAcrossPauseFailsWithNodeLost(t *testing.T) {
	const nt = time.Second
	var pa, pb *pauseTransport
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.NodeTimeout = nt
		pa = &pauseTransport{Transport: c.Transport}
		c.Transport = pa
	})
	b, _, _ := nodeWith(t, false, func(c *Config) {
		c.NodeTimeout = nt
		pb = &pauseTransport{Transport: c.Transport}
		c.Transport = pb
	})
	on := []string{b.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := testHolder(t, a)
	// A proxy of h on b, holding nothing once k1 is back.
	if err := h.LockOn(ctx, on, Exclusive, "k1"); err != nil {
		t.Fatal(err)
	}
	h.Release("k1")
	eventually(t, "k1 free on b", func() bool { return freeOn(b, "k1") })
	if proxyCount(b) != 1 {
		t.Fatalf("b has %d proxies, want h's", proxyCount(b))
	}
	pa.pause()
	pb.pause()
	t.Cleanup(pa.unpause)
	t.Cleanup(pb.unpause)
	errc := lockOnAsync(ctx, h, on, Exclusive, "k2")
	dropped := func() bool {
		b.mu.RLock()
		defer b.mu.RUnlock()
		tb, ok := b.tombs[h.ID()]
		return ok && tb.closed
	}
	if !waitFor(dropped) {
		t.Fatal("b did not drop the holders of a, which it did not hear from")
	}
	mustNotReturn(t, errc, "the request held by the paused link")
	pa.unpause()
	pb.unpause()
	err := recv(t, errc, "the request held across the pause")
	if !errors.Is(err, ErrNodeLost) || errors.Is(err, ErrAborted) {
		t.Fatalf("request held across the pause, refused by b: %v; want ErrNodeLost (h withdrew nothing)", err)
	}
	t.Logf("the request's error: %v", err)
	if !freeOn(b, "k2") {
		t.Fatalf("b holds k2 after the request failed: %s", dump(b, "k2"))
	}
	select {
	case <-h.Lost():
		t.Fatalf("h was told Lost, holding nothing on b: %v", h.LostCause())
	default:
	}
}

// Issue 44, item 6: a request to another node that was closed (its
// server still up) fails with ErrNodeLost, not with ErrClosed, whose doc
// and "make a new holder" are about this holder and this node, both
// open: the holder locks on its own node still.
func TestRequestToClosedNodeFailsWithNodeLost(t *testing.T) {
	a, _, _ := nodeWith(t, false, nil)
	b, closeB, _ := nodeWith(t, false, nil)
	h := testHolder(t, a)
	closeB()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "y")
	if !errors.Is(err, ErrNodeLost) || errors.Is(err, ErrClosed) {
		t.Fatalf("LockOn on a closed node: %v; want ErrNodeLost", err)
	}
	if err := h.Lock(ctx, Exclusive, "x"); err != nil {
		t.Fatalf("Lock on the holder's own node after: %v", err)
	}
}
