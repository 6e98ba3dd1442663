package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// lateAcquire is a Transport whose Acquire calls fail at once for the
// caller but reach the other node later, when the test says (deliver is
// closed): a lane that broke with the request already out, delivered
// after the holder gave up.
type lateAcquire struct {
	Transport
	deliver chan struct{}
	replies chan AcquireReply // the late calls' replies (buffered)
	wg      *sync.WaitGroup
}

var errLaneBroke = errors.New("test: the lane broke with the request on its way")

func (t lateAcquire) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if sm != "Acquire" {
		return t.Transport.Call(ctx, addr, sp, sm, args, reply)
	}
	a := *args.(*AcquireArgs)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		<-t.deliver
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var rep AcquireReply
		if t.Transport.Call(cctx, addr, sp, sm, &a, &rep) == nil {
			t.replies <- rep
		}
	}()
	return errLaneBroke
}

// Issue 32 (read, then proven): a node forgets a gone holder's tombstone
// after 2 × NodeTimeout. An Acquire of that holder delivered later than
// that is granted, and nothing would ever release it: the holder's node
// is alive, and the holder sent its Drop long ago. The node checks each
// new proxy with the holder's node (Ping), which says the holder is gone.
func TestAcquireDeliveredAfterItsHoldersTombstoneIsReleased(t *testing.T) {
	const nodeTimeout = 300 * time.Millisecond
	var late sync.WaitGroup
	deliver := make(chan struct{})
	replies := make(chan AcquireReply, 1)
	t.Cleanup(late.Wait)
	var once sync.Once
	deliverNow := func() { once.Do(func() { close(deliver) }) }
	t.Cleanup(deliverNow)
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.NodeTimeout = nodeTimeout
		c.Transport = lateAcquire{c.Transport, deliver, replies, &late}
	})
	b, _, _ := nodeWith(t, false, func(c *Config) { c.NodeTimeout = nodeTimeout })
	h := testHolder(t, a)
	if err := h.LockOn(context.Background(), []string{b.Addr()}, Exclusive, "k"); !errors.Is(err, ErrNodeLost) {
		t.Fatalf("the request whose lane broke: %v, want ErrNodeLost", err)
	}
	h.Close()
	tombed := func() bool {
		b.mu.RLock()
		defer b.mu.RUnlock()
		tb, ok := b.tombs[h.ID()]
		return ok && tb.closed
	}
	if !waitFor(tombed) {
		t.Fatal("b did not hear of the holder's Drop")
	}
	// The Acquire lands past the holder's tombstone on b.
	time.Sleep(2*nodeTimeout + 200*time.Millisecond)
	deliverNow()
	select {
	case rep := <-replies:
		if rep.Code != codeOK {
			t.Fatalf("the late Acquire landed on b and was refused (%d %s): the tombstone is still there, the test did not wait long enough", rep.Code, rep.Msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late Acquire did not land on b")
	}
	start := time.Now()
	if !waitFor(func() bool { return freeOn(b, "k") }) {
		t.Fatalf("b keeps k for a holder that closed: %s", dump(b, "k"))
	}
	t.Logf("the gone holder's late grant released %v after it landed", time.Since(start))
}
