package benchkit

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram is a log-bucketed latency histogram: 32 buckets per power of
// two (about 3 % resolution), fixed size, lock-free. Writers record into
// one of a few shards so that 10,000 of them do not all hammer the same
// cache lines; the shards are summed only when the point is over. The zero
// value is ready to use; it is large (about 130 KB), so allocate it.
type Histogram struct {
	shards [histShards][histBuckets]atomic.Uint64
}

const (
	histSubBits = 5
	histBuckets = 64 << histSubBits // covers every int64 nanosecond count
	histShards  = 8
)

func bucketOf(ns uint64) int {
	if ns < 1<<histSubBits {
		return int(ns)
	}
	shift := bits.Len64(ns) - histSubBits - 1
	return (shift+1)<<histSubBits + int(ns>>shift) - 1<<histSubBits
}

// bucketMid is the middle of bucket i, in nanoseconds.
func bucketMid(i int) uint64 {
	if i < 1<<histSubBits {
		return uint64(i)
	}
	shift := i>>histSubBits - 1
	m := uint64(i&(1<<histSubBits-1) + 1<<histSubBits)
	return m<<shift + (uint64(1)<<shift)/2
}

// Record adds one latency, into the shard of writer shard (any int).
func (h *Histogram) Record(shard int, d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.shards[shard%histShards][bucketOf(uint64(d))].Add(1)
}

// Quantiles returns the latencies at each q (0 < q <= 1), or nil if
// nothing was recorded.
func (h *Histogram) Quantiles(qs ...float64) []time.Duration {
	var sum [histBuckets]uint64
	var total uint64
	for s := range h.shards {
		for i := range sum {
			n := h.shards[s][i].Load()
			sum[i] += n
			total += n
		}
	}
	if total == 0 {
		return nil
	}
	out := make([]time.Duration, len(qs))
	for k, q := range qs {
		rank := uint64(q*float64(total) + 0.5)
		rank = min(max(rank, 1), total)
		var seen uint64
		for i, n := range sum {
			seen += n
			if seen >= rank {
				out[k] = time.Duration(bucketMid(i))
				break
			}
		}
	}
	return out
}

// Merge adds every latency recorded in o to h. Neither may be recorded
// into meanwhile.
func (h *Histogram) Merge(o *Histogram) {
	for s := range o.shards {
		for i := range o.shards[s] {
			if n := o.shards[s][i].Load(); n > 0 {
				h.shards[s][i].Add(n)
			}
		}
	}
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() uint64 {
	var total uint64
	for s := range h.shards {
		for i := range h.shards[s] {
			total += h.shards[s][i].Load()
		}
	}
	return total
}
