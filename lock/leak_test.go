package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Holders that make one request to b whose context has already ended (or
// ends before the request is sent), then are closed: b must not keep
// anything for them. Each leaves a proxy in b's map for good.
func TestProxiesOfClosedHoldersAreForgotten(t *testing.T) {
	a, b := serveNode(t), serveNode(t)
	const n = 200
	for i := 0; i < n; i++ {
		h, err := a.NewHolder(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("LockOn with an ended ctx: %v", err)
		}
		h.Close()
	}
	// Every Abort and Drop is acknowledged well within this.
	ok := waitFor(func() bool { return proxyCount(b) == 0 })
	time.Sleep(500 * time.Millisecond)
	if !ok || proxyCount(b) != 0 {
		t.Fatalf("b keeps %d proxies of %d closed holders of a", proxyCount(b), n)
	}
}
