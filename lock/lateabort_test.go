package lock

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// delayAbort is a Transport that delivers Abort late, as when its first
// attempt is lost and the outbox retries it, or when it is overtaken by a
// later call on another lane: the code expects this ("even if their Abort
// is still on its way", AcquireArgs.LastOK).
type delayAbort struct {
	Transport
	d time.Duration
}

func (t delayAbort) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if sm == "Abort" {
		time.Sleep(t.d)
	}
	return t.Transport.Call(ctx, addr, sp, sm, args, reply)
}

// Request s2 (k2 on a and b) fails: b granted k2, a did not. Request s3 is
// local and succeeds (lastOK = s3). Request s4 asks k2 on b again and
// succeeds: b finds k2 still held by s2 (its Abort is late, and
// releaseFailed only looks at (LastOK, Seq) = (s3, s4)) and keeps it as a
// re-entry. Then s2's Abort arrives and releaseGrant(s2) gives k2 back on
// b, although the holder now holds it by s4: another holder takes k2
// exclusively on b beside it.
func TestLateAbortDoesNotStripALaterGrant(t *testing.T) {
	// b must sort first: it is asked (and grants) before a fails.
	slow := func(c *Config) { c.Transport = delayAbort{c.Transport, abortDelay()} }
	a, _, _ := nodeWith(t, false, slow)
	b, _, _ := nodeWith(t, false, slow)
	if a.Addr() < b.Addr() {
		a, b = b, a
	}
	ctx := context.Background()
	blk := testHolder(t, a)
	if err := blk.Lock(ctx, Exclusive, "k2"); err != nil {
		t.Fatal(err)
	}
	h := testHolder(t, a)
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := h.LockOn(dctx, []string{a.Addr(), b.Addr()}, Exclusive, "k2") // s2 (s1 unused)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("s2: %v", err)
	}
	if err := h.Lock(ctx, Exclusive, "z"); err != nil { // s3, local
		t.Fatal(err)
	}
	if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k2"); err != nil { // s4
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // s2's Abort lands
	other := testHolder(t, b)
	octx, ocancel := context.WithTimeout(ctx, time.Second)
	defer ocancel()
	if err := other.Lock(octx, Exclusive, "k2"); err == nil {
		t.Fatalf("another holder took k2 exclusively on b while h holds it there (h's LockOn s4 succeeded): %s", dump(b, "k2"))
	}
}

func abortDelay() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LOCKTEST_ABORT_DELAY")); err == nil {
		return d
	}
	return time.Second
}
