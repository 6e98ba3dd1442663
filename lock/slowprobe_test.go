package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// delayProbe is a Transport that delivers Probe casts late, as a busy
// peer sender or a slow network does; the rest goes at once.
type delayProbe struct {
	Transport
	d  time.Duration
	wg *sync.WaitGroup
}

func (t delayProbe) Cast(ctx context.Context, addr, sp, sm string, args any) error {
	if sm != "Probe" {
		return t.Transport.Cast(ctx, addr, sp, sm, args)
	}
	// Late, but without holding back the sender's other casts. The
	// cast's own context would end before then: the test bounds it.
	t.wg.Add(1)
	time.AfterFunc(t.d, func() {
		defer t.wg.Done()
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = t.Transport.Cast(cctx, addr, sp, sm, args)
	})
	return nil
}

// Issue 32, item 3: a walk that comes back to the holder it started from
// declares a cycle only if the request it started from still waits. O
// (older, of a) holds k1 on a and waits on b for k2, which Z (younger,
// of a) holds there. O's walk goes from b to Z's node, late. Meanwhile
// O's request ends (its deadline), and Z asks k1 on a, where it waits for
// O's hold: no cycle, O waits for nothing. The late walk then reaches Z,
// follows Z's wait to O and is back at its start: Z, the youngest on the
// path, must not fail for a cycle whose first edge had gone before its
// wait began.
func TestSlowProbeAfterItsRequestEndedFindsNoCycle(t *testing.T) {
	var late sync.WaitGroup
	t.Cleanup(late.Wait)
	slow := func(c *Config) { c.Transport = delayProbe{c.Transport, 600 * time.Millisecond, &late} }
	a, _, _ := nodeWith(t, false, slow)
	b, _, _ := nodeWith(t, false, slow)
	ctx := context.Background()
	o := testHolder(t, a)
	z := testHolder(t, a)
	if err := o.Lock(ctx, Exclusive, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := z.LockOn(ctx, []string{b.Addr()}, Exclusive, "k2"); err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := o.LockOn(octx, []string{b.Addr()}, Exclusive, "k2")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("O's request for k2 on b: %v, want its deadline", err)
	}
	zctx, zcancel := context.WithTimeout(ctx, 10*time.Second)
	defer zcancel()
	zerr := lockAsync(zctx, z, Exclusive, "k1")
	// The late walk (600 ms after O queued) reaches Z while Z waits.
	time.Sleep(time.Second)
	o.Release("k1")
	if err := recv(t, zerr, "Z's request"); err != nil {
		t.Fatalf("Z, waiting for O's hold of k1 (O waits for nothing), failed: %v", err)
	}
}
