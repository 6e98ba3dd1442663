package lane

import (
	"testing"
	"unsafe"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// TestPendingShardIsOneCacheLine: the shards are taken by both cores at
// once; each is one 64-byte line, so that no two share one.
func TestPendingShardIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(pendingShard{}); n != 64 {
		t.Fatalf("a pending shard is %d bytes, want 64 (one cache line)", n)
	}
}

// TestPendingLateReplyClaimsNothing: a reply to a call that was claimed
// already (its caller gave up) claims nothing, even once the call's slot
// holds another call: ids are never given twice, slots are reused.
func TestPendingLateReplyClaimsNothing(t *testing.T) {
	tab := newPendingTable()
	first := &Pending{Call: &client.Call{}}
	old := tab.register(first)
	if tab.claim(old) != first {
		t.Fatal("a registered call was not claimed by its id")
	}
	// Enough registrations that every shard reuses its freed slot.
	seen := map[uint64]bool{old: true}
	var live []uint64
	for i := 0; i < 64*pendingShards; i++ {
		id := tab.register(&Pending{Call: &client.Call{}})
		if seen[id] {
			t.Fatalf("id %#x given twice", id)
		}
		seen[id] = true
		live = append(live, id)
	}
	if pc := tab.claim(old); pc != nil {
		t.Fatal("a late reply claimed a call registered after its own")
	}
	never := uint64(1)<<63 | old&(1<<(shardBits+slotBits)-1) // a slot in use, a count not reached
	pcs := tab.claimAll([]codec.Reply{{ID: old}, {ID: live[0]}, {ID: never}}, nil)
	if pcs[0] != nil || pcs[1] == nil || pcs[2] != nil {
		t.Fatalf("claimAll of a stale, a pending and a never given id: %v", pcs)
	}
	n := 0
	for si := range tab.shards {
		n += tab.shards[si].waitingLocked()
	}
	if n != len(live)-1 {
		t.Fatalf("%d calls waiting, want %d", n, len(live)-1)
	}
	if all := tab.takeAll(); len(all) != len(live)-1 || !tab.empty() {
		t.Fatalf("takeAll took %d, want %d, and left the table empty: %v", len(all), len(live)-1, tab.empty())
	}
	// After takeAll, new ids are still new.
	for i := 0; i < 4*pendingShards; i++ {
		if id := tab.register(&Pending{Call: &client.Call{}}); seen[id] {
			t.Fatalf("id %#x given again after takeAll", id)
		}
	}
}

// TestPendingIDNeverZero: when a shard's count of registrations wraps,
// the call in its first slot does not get id 0, which Submit reads as
// "not registered yet".
func TestPendingIDNeverZero(t *testing.T) {
	tab := newPendingTable()
	for si := range tab.shards {
		tab.shards[si].seq = 1<<(64-shardBits-slotBits) - 1
	}
	// Shard 0's first registration is the one that would get id 0; the
	// shard is picked at random, so register until it has been picked
	// (1,000 tries leave a chance of 1e-28 to miss it).
	for i := 0; i < 1000; i++ {
		id := tab.register(&Pending{Call: &client.Call{}})
		if id == 0 {
			t.Fatal("a call got id 0 when its shard's count wrapped")
		}
		if id&(pendingShards-1) == 0 {
			return
		}
	}
	t.Fatal("shard 0 was never picked in 1,000 registrations")
}
