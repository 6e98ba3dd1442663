package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
)

// holdVerdicts is a Transport that keeps the Verdict casts its node sends
// instead of sending them, as a network that delays them: the test
// delivers them later, itself.
type holdVerdicts struct {
	Transport
	held chan *VerdictArgs
}

func (h *holdVerdicts) Cast(ctx context.Context, addr, sp, sm string, args any) error {
	if sm == "Verdict" {
		v := *args.(*VerdictArgs)
		select {
		case h.held <- &v:
		default:
		}
		return nil
	}
	return h.Transport.Cast(ctx, addr, sp, sm, args)
}

// Go passes the one-way messages on (the node sends them with Go when its
// transport has it).
func (h *holdVerdicts) Go(ctx context.Context, addr, sp, sm string, args, reply any, done chan *client.Call) *client.Call {
	return h.Transport.(asyncTransport).Go(ctx, addr, sp, sm, args, reply, done)
}

// TestLateVerdictFailsOnlyItsOwnRequest (issue 15): a deadlock verdict
// that arrives after the request it names ended must fail nothing, not a
// later request of the same holder for the same key. A row's tickets
// start again at 1 once its key is free, so the holder's later request
// can wait there with the very ticket the verdict names. In the hot-key
// test a walk that started from a request granted meanwhile (see
// TestGrantedWaiterBlocksNobody) sent such verdicts, and now and then one
// arrived after the holder's next request queued with the same ticket:
// a false ErrDeadlock.
//
// Nodes a and b, holders X and then H (younger) of a. A real cycle: X
// holds k on b, H holds m on a and waits for k on b (ticket 2), X waits
// for m on a. Its verdict, for H's request on b, is held back by a's transport; H's
// request ends (its context) and the cycle with it; everything is let
// go. Then Y holds k on b again and H waits there again, with ticket 2.
// Before the fix, the late verdict failed that request with ErrDeadlock.
func TestLateVerdictFailsOnlyItsOwnRequest(t *testing.T) {
	var hv *holdVerdicts
	na, _, _ := nodeWith(t, false, func(c *Config) {
		hv = &holdVerdicts{Transport: c.Transport, held: make(chan *VerdictArgs, 16)}
		c.Transport = hv
		// Only the walks at queueing: no periodic walk in between.
		c.ProbeInterval = time.Minute
	})
	nb, _, _ := nodeWith(t, false, func(c *Config) { c.ProbeInterval = time.Minute })
	on := []string{nb.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x := testHolder(t, na)
	h := testHolder(t, na)
	y := testHolder(t, na)
	if err := x.LockOn(ctx, on, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	if err := h.Lock(ctx, Exclusive, "m"); err != nil {
		t.Fatal(err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	eh := lockOnAsync(hctx, h, on, Exclusive, "k")
	if !waitFor(func() bool { return ticketOf(nb, "k") == 2 }) {
		t.Fatalf("H did not queue for k on b: %s", dump(nb, "k"))
	}
	ex := lockAsync(ctx, x, Exclusive, "m")
	var v *VerdictArgs
	select {
	case v = <-hv.held:
	case err := <-eh:
		t.Fatalf("H's request for k on b returned: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("no verdict for the cycle X -> H -> X in 10 s: b %s; a %s", dump(nb, "k"), dump(na, "m"))
	}
	if v.Owner != h.ID() || v.Key != "k" || v.Ticket != 2 || v.Code != codeDeadlock {
		t.Fatalf("verdict %+v; want H's request for k on b (ticket 2) failed with ErrDeadlock", v)
	}
	// H's request ends without the verdict, which breaks the cycle.
	hcancel()
	if err := recv(t, eh, "H's request for k on b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("H's request for k on b after its context ended: %v; want context.Canceled", err)
	}
	h.ReleaseAll()
	if err := recv(t, ex, "X's request for m"); err != nil {
		t.Fatalf("X's request for m after H let it go: %v", err)
	}
	x.ReleaseAll()
	eventually(t, "k free on b", func() bool { return freeOn(nb, "k") })
	// The same picture on b again, without a cycle: Y holds k (ticket
	// 1), H waits for it with ticket 2.
	if err := y.LockOn(ctx, on, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	eh = lockOnAsync(ctx, h, on, Exclusive, "k")
	if !waitFor(func() bool { return ticketOf(nb, "k") == 2 }) {
		t.Fatalf("H did not queue for k on b again: %s", dump(nb, "k"))
	}
	// The late verdict arrives.
	if err := (&Service{n: nb}).Verdict(ctx, v, &Ack{}); err != nil {
		t.Fatal(err)
	}
	y.ReleaseAll()
	if err := recv(t, eh, "H's second request for k on b"); err != nil {
		t.Fatalf("H's second request for k on b, on no cycle: %v; want it granted when Y let k go (a late verdict of its first request failed it)", err)
	}
}
