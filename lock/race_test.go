package lock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// b's liveness loop (watchPeers -> origins) reads its proxies' closed flag
// under b's node mutex, while Drop (from a's closing holders) writes it
// under the proxy's own mutex only. Here origins is called in a loop, as
// watchPeers calls it every NodeTimeout/8, to make the window likely.
// Run with -race.
func TestOriginsReadsClosedSafely(t *testing.T) {
	a, _, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			b.origins()
		}
	}()
	defer func() { close(done); wg.Wait() }()
	stop := time.Now().Add(5 * time.Second)
	for i := 0; i < 300 && time.Now().Before(stop); i++ {
		h, err := a.NewHolder(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	waitFor(func() bool { return proxyCount(b) == 0 })
}
