package lock

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// A node's holders are closed, then the node (the usual shutdown order,
// as Node.Close's doc asks). The application's rpcx server keeps running
// (it serves other services). The locks those holders held on the other
// node must be free again within NodeTimeout plus a second.
func TestNodeCloseAfterHolderCloseFreesRemoteLocks(t *testing.T) {
	a, closeA, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	ctx := context.Background()
	const n = 20
	for i := 0; i < n; i++ {
		h, err := a.NewHolder(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LockOn(ctx, []string{b.Addr()}, Exclusive, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	closeA()
	countLeft := func() int {
		left := 0
		for i := 0; i < n; i++ {
			if !freeOn(b, fmt.Sprint("k", i)) {
				left++
			}
		}
		return left
	}
	deadline := time.Now().Add(lossWait())
	left := countLeft()
	for left > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		left = countLeft()
	}
	if left > 0 {
		t.Fatalf("%d of %d keys still held on b %v after their holders and their node were closed; k0: %s; proxies on b: %d",
			left, n, lossWait(), dump(b, "k0"), proxyCount(b))
	}
}

// A closed node answers Ping as a node that ended (incarnation 0), so the
// others drop what its holders hold there at once.
func TestClosedNodeAnswersPingAsEnded(t *testing.T) {
	a, closeA, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	closeA()
	var rep PingReply
	err := b.cfg.Transport.Call(context.Background(), a.Addr(), ServicePath, "Ping", &PingArgs{From: b.Addr()}, &rep)
	if err == nil && rep.Incarnation == a.Incarnation() {
		t.Fatalf("closed node answered Ping with its live incarnation %d", rep.Incarnation)
	}
}

// lossWait is NodeTimeout plus a second, or LOCKTEST_WAIT to show the keys stay.
func lossWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LOCKTEST_WAIT")); err == nil {
		return d
	}
	return DefaultNodeTimeout + time.Second
}
