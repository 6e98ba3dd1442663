package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ErrClosed's doc: "returned by the methods of a Holder that was closed,
// or whose context ended, and of a Node that was closed". A holder of a
// closed node still takes locks, here and on other nodes, and what it
// takes on the other node is never given back (the node's background
// sends are off once it is closed).
func TestHolderOfClosedNodeRefusesOrCleansUp(t *testing.T) {
	a, closeA, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	ctx := context.Background()
	h, err := a.NewHolder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	closeA()
	errLocal := h.Lock(ctx, Exclusive, "x")
	errRemote := h.LockOn(ctx, []string{b.Addr()}, Exclusive, "y")
	h.Close()
	if errRemote == nil {
		// Then it must at least be given back when the holder closes.
		time.Sleep(DefaultNodeTimeout + time.Second)
		if !freeOn(b, "y") {
			t.Fatalf("holder of a closed node: Lock %v, LockOn %v; after h.Close, y still held on b %v later: %s",
				errLocal, errRemote, DefaultNodeTimeout+time.Second, dump(b, "y"))
		}
	}
	if !errors.Is(errLocal, ErrClosed) || !errors.Is(errRemote, ErrClosed) {
		t.Fatalf("holder of a closed node: Lock %v, LockOn %v; want ErrClosed", errLocal, errRemote)
	}
}
