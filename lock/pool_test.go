package lock

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// b's rpcx server runs handlers on a bounded pool (server.WithPool, which
// the batch plugin honours). Two remote requests that wait for k on b
// occupy both workers; the Release that would let them in is queued
// behind them and never runs: the waiters time out although k was
// released at once.
func TestWaitingRemoteRequestsDoNotStarveRelease(t *testing.T) {
	a := serveNode(t)
	s := server.NewServer(server.WithPool(2, 100))
	if _, err := batchserver.New(s); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := serveAt(s, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bc, err := batchclient.New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Server: s, Addr: addr, Transport: bc})
	if err != nil {
		t.Fatal(err)
	}
	// Every client of s gone before s closes: rpcx's Close stops the
	// WithPool pool without waiting for the connections' goroutines, and
	// one handing the pool a request then is a race inside rpcx and pond
	// (-race reported it here once, 2026-12-01; see testsvc.StopWhenIdle).
	t.Cleanup(func() { b.Close(); a.Close(); bc.Close(); testsvc.StopWhenIdle(s, stop)() })
	ctx := context.Background()
	blk := testHolder(t, a)
	if err := blk.LockOn(ctx, []string{b.Addr()}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	var chs []chan error
	for i := 0; i < 2; i++ {
		chs = append(chs, lockOnAsync(wctx, testHolder(t, a), []string{b.Addr()}, Exclusive, "k"))
	}
	if !waitFor(queuedAtLeast(b, "k", 2)) {
		t.Fatalf("waiters did not queue: %s", dump(b, "k"))
	}
	blk.Release("k")
	select {
	case err := <-chs[0]:
		if err != nil {
			t.Fatalf("first waiter: %v", err)
		}
	case err := <-chs[1]:
		if err != nil {
			t.Fatalf("second waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("k released on b 5 s ago and no waiter got it: %s", dump(b, "k"))
	}
}
