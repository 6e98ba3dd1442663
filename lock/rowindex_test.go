package lock

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// rowIndex against a Go map over random puts and deletes, with hashes
// drawn from a few values so that keys collide in full (same hash), share
// a home slot, and runs wrap around the table's end; after every step
// every key must be found or not as the map says, and the table must
// stay within its load bounds.
func TestRowIndexActsAsMap(t *testing.T) {
	for _, spread := range []uint64{1, 3, 64, 1 << 20} {
		r := rand.New(rand.NewPCG(spread, 7))
		var x rowIndex
		want := map[string]*row{}
		hashOf := func(key string) uint64 {
			n, _ := strconv.Atoi(key[1:])
			// The low 8 bits pick the shard in a table: keep them fixed
			// and vary the bits above, the index's.
			return (uint64(n)*0x9e3779b97f4a7c15%spread)<<shardBits | 0x2a
		}
		keys := make([]string, 300)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		for step := range 20000 {
			key := keys[r.IntN(len(keys))]
			if cur := want[key]; cur != nil && r.IntN(2) == 0 {
				x.del(cur)
				delete(want, key)
			} else if cur == nil {
				nr := &row{key: key, hash: hashOf(key)}
				x.put(nr)
				want[key] = nr
			}
			if x.n != len(want) {
				t.Fatalf("spread %d step %d: n = %d, map has %d", spread, step, x.n, len(want))
			}
			if x.n > 0 && (2*x.n > len(x.slots) || len(x.slots) > minRowSlots && 8*x.n < len(x.slots)/2) {
				t.Fatalf("spread %d step %d: %d rows in %d slots", spread, step, x.n, len(x.slots))
			}
			if step%97 == 0 || len(want) < 4 {
				for _, k := range keys {
					if got := x.get(hashOf(k), k); got != want[k] {
						t.Fatalf("spread %d step %d: get(%s) = %p, want %p", spread, step, k, got, want[k])
					}
				}
			}
		}
		for k, cur := range want {
			x.del(cur)
			delete(want, k)
		}
		if x.n != 0 || len(x.slots) > minRowSlots {
			t.Fatalf("spread %d: emptied index keeps %d rows in %d slots", spread, x.n, len(x.slots))
		}
	}
}

// A key's row is told apart from another key's with the same hash by its
// key, and the index holds rows, not copies.
func TestRowIndexSameHashDifferentKeys(t *testing.T) {
	var x rowIndex
	const h = 1 << shardBits
	a := &row{key: "a", hash: h}
	b := &row{key: "b", hash: h}
	x.put(a)
	if got := x.get(h, "b"); got != nil {
		t.Fatalf("get(b) before b was put = %+v", got)
	}
	x.put(b)
	if x.get(h, "a") != a || x.get(h, "b") != b {
		t.Fatal("rows with one hash not told apart by key")
	}
	x.del(a)
	if x.get(h, "a") != nil || x.get(h, "b") != b {
		t.Fatal("deleting a lost b, or kept a")
	}
}
