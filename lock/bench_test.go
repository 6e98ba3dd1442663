package lock

import (
	"context"
	"fmt"
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
