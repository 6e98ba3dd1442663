package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// BenchmarkDesign4SharedLocal is elock's design 4: every transaction takes
// ten shared locks on its own node, on keys no other holder touches, and
// releases them. One op is one transaction (ten locks); locks/s is
// reported.
func BenchmarkDesign4SharedLocal(b *testing.B) {
	n := localNode(b)
	var ids atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := ids.Add(1)
		h, err := n.NewHolder(context.Background())
		if err != nil {
			b.Error(err)
			return
		}
		defer h.Close()
		var keys [10]string
		for i := range keys {
			keys[i] = fmt.Sprintf("g%d/tag%d", id, i)
		}
		ctx := context.Background()
		for pb.Next() {
			if err := h.Lock(ctx, Shared, keys[:]...); err != nil {
				b.Error(err)
				return
			}
			h.ReleaseAll()
		}
	})
	b.ReportMetric(float64(b.N)*10/b.Elapsed().Seconds(), "locks/s")
}

// BenchmarkDesign1TwoNodes is elock's design 1 in one process: holders of
// two nodes each take one exclusive lock on both nodes, on a key drawn from
// a large pool, and release it. One op is one lock; allocations per op
// cover both nodes.
func BenchmarkDesign1TwoNodes(b *testing.B) {
	a, _, _ := nodeWith(b, false, nil)
	c, _, _ := nodeWith(b, false, nil)
	nodes := []string{a.cfg.Addr, c.cfg.Addr}
	var ids atomic.Int64
	b.SetParallelism(200)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := ids.Add(1)
		n := a
		if id%2 == 0 {
			n = c
		}
		h, err := n.NewHolder(context.Background())
		if err != nil {
			b.Error(err)
			return
		}
		defer h.Close()
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			key := fmt.Sprintf("k%d/%d", id, i%1000)
			if err := h.LockOn(ctx, nodes, Exclusive, key); err != nil {
				b.Error(err)
				return
			}
			h.Release(key)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "locks/s")
}

// BenchmarkTableManyOwners is the lock table as design 1 uses it on one
// node, without the transport: 10,000 owners each hold one key, drawn
// from a pool of 5,000,000, and in turn give it back and take another.
// One op is one take and one release. With that many owners and keys an
// owner's memory and its key's row are cold when used, as in the node
// processes of perf/locks; a benchmark with a few owners would hide what
// their layout costs.
func BenchmarkTableManyOwners(b *testing.B) {
	const owners, pool = 10000, 5_000_000
	t := newTable()
	os := make([]*owner, owners)
	held := make([]string, owners)
	keys := make([]string, 1<<16)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range keys {
		keys[i] = fmt.Sprintf("obj%d", r.IntN(pool))
	}
	for i := range os {
		os[i] = newOwner(OwnerID{Node: 1, Seq: uint64(i + 1)}, 0, "")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := i % owners
		o := os[j]
		if held[j] != "" {
			o.release(t, held[j], 0)
		}
		k := keys[(i*7919)%len(keys)]
		if o.takeNow(t, []string{k}, Exclusive, uint64(i+1)) {
			held[j] = k
		} else {
			held[j] = ""
		}
	}
}
