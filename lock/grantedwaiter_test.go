package lock

import "testing"

// TestGrantedWaiterBlocksNobody: a request granted while a deadlock walk
// reads it (it is granted under the shard mutex, and leaves the index of
// waits only when its goroutine wakes) waits for nobody. Before the fix
// the walk read the key's holders as its blockers, the request's own
// holder among them: a walk that started from it, or reached it, came
// back to that holder and declared a cycle of one, whose verdict could
// fail the holder's next request for the key (see
// TestLateVerdictFailsOnlyItsOwnRequest). blockersOf returned [H].
func TestGrantedWaiterBlocksNobody(t *testing.T) {
	tb := newTable()
	x := newOwner(OwnerID{Node: 1, Seq: 1}, 1, "")
	h := newOwner(OwnerID{Node: 1, Seq: 2}, 2, "")
	if w := tb.tryTake(x, "k", Exclusive, 1); w != nil {
		t.Fatal("X waits for a free key")
	}
	w := tb.tryTake(h, "k", Exclusive, 1)
	if w == nil {
		t.Fatal("H took k that X holds")
	}
	if got := tb.blockersOf(w); len(got) != 1 || got[0] != x {
		t.Fatalf("H queued behind X waits for %v; want X", ids(got))
	}
	tb.release(x, "k")
	if err := <-w.done; err != nil {
		t.Fatalf("H's request when X let go: %v", err)
	}
	if got := tb.blockersOf(w); len(got) != 0 {
		t.Fatalf("H's request, granted, waits for %v; want nobody", ids(got))
	}
}

func ids(os []*owner) []OwnerID {
	out := make([]OwnerID, 0, len(os))
	for _, o := range os {
		out = append(out, o.id)
	}
	return out
}
