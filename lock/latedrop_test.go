package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// lateAcquire is a Transport whose Acquire calls fail at once for the
// caller but reach the other node d later: a lane that broke with the
// request already out, delivered after the holder gave up.
type lateAcquire struct {
	Transport
	d  time.Duration
	wg *sync.WaitGroup
}

var errLaneBroke = errors.New("test: the lane broke with the request on its way")

func (t lateAcquire) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if sm != "Acquire" {
		return t.Transport.Call(ctx, addr, sp, sm, args, reply)
	}
	a := *args.(*AcquireArgs)
	t.wg.Add(1)
	time.AfterFunc(t.d, func() {
		defer t.wg.Done()
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = t.Transport.Call(cctx, addr, sp, sm, &a, &AcquireReply{})
	})
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
	t.Cleanup(late.Wait)
	a, _, _ := nodeWith(t, false, func(c *Config) {
		c.NodeTimeout = nodeTimeout
		c.Transport = lateAcquire{c.Transport, 4 * nodeTimeout, &late}
	})
	b, _, _ := nodeWith(t, false, func(c *Config) { c.NodeTimeout = nodeTimeout })
	h := testHolder(t, a)
	if err := h.LockOn(context.Background(), []string{b.Addr()}, Exclusive, "k"); !errors.Is(err, ErrNodeLost) {
		t.Fatalf("the request whose lane broke: %v, want ErrNodeLost", err)
	}
	h.Close()
	// The Acquire lands 4 × NodeTimeout after it was sent, past the
	// holder's tombstone (its Abort's and Drop's) on b.
	if !waitFor(func() bool { return !freeOn(b, "k") }) {
		t.Fatal("the late Acquire never landed on b")
	}
	start := time.Now()
	if !waitFor(func() bool { return freeOn(b, "k") }) {
		t.Fatalf("b keeps k for a holder that closed: %s", dump(b, "k"))
	}
	t.Logf("the gone holder's late grant released %v after it landed", time.Since(start))
}
