package lock

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// frozenAddr returns the address of a node that accepts TCP connections
// but never answers, like a SIGSTOPped process.
func frozenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A burst of one-way messages to a node that does not answer (the Aborts
// of requests that failed there by their deadline, then the Drops of
// their holders) queues for the node's sender to that peer: it does not
// start a goroutine per message.
func TestBurstToFrozenNodeStartsNoGoroutineEach(t *testing.T) {
	a := serveNode(t)
	frozen := frozenAddr(t)
	const holders = 300
	hs := make([]*Holder, holders)
	for i := range hs {
		hs[i] = testHolder(t, a)
	}
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.LockOn(ctx, []string{frozen}, Exclusive, fmt.Sprint("k", i))
		}()
	}
	wg.Wait()
	// Every request failed and sent an Abort, which cannot be delivered
	// for NodeTimeout (2 s).
	afterAborts := runtime.NumGoroutine() - base
	for _, h := range hs {
		h.Close()
	}
	afterDrops := runtime.NumGoroutine() - base
	t.Logf("goroutines beyond the %d before: %d after %d Aborts, %d after %d Drops", base, afterAborts, holders, afterDrops, holders)
	const most = 50
	if afterAborts > most || afterDrops > most {
		t.Fatalf("%d Aborts and %d Drops to a frozen node started %d and %d goroutines, want at most %d", holders, holders, afterAborts, afterDrops, most)
	}
}

// A burst of releases to a live node is delivered: every key is free
// there soon after. (Goroutines are not counted here: the receiving
// node's server runs in this process too.)
func TestBurstOfReleasesIsDelivered(t *testing.T) {
	a := serveNode(t)
	b := serveNode(t)
	const holders = 300
	ctx := context.Background()
	hs := make([]*Holder, holders)
	for i := range hs {
		hs[i] = testHolder(t, a)
		if err := hs[i].LockOn(ctx, []string{b.Addr()}, Exclusive, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hs {
		h.ReleaseAll()
	}
	eventually(t, "every key free on b", func() bool {
		for i := range hs {
			if !freeOn(b, fmt.Sprint("k", i)) {
				return false
			}
		}
		return true
	})
	if u := a.Stats().Undelivered; u != 0 {
		t.Fatalf("%d releases given up", u)
	}
}
