package benchkit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramQuantiles(t *testing.T) {
	h := new(Histogram)
	for i := 1; i <= 1000; i++ {
		h.Record(i, time.Duration(i)*time.Microsecond)
	}
	q := h.Quantiles(0.5, 0.99, 0.999)
	assert.InEpsilon(t, 500*time.Microsecond, q[0], 0.04)
	assert.InEpsilon(t, 990*time.Microsecond, q[1], 0.04)
	assert.InEpsilon(t, 999*time.Microsecond, q[2], 0.04)
	assert.Nil(t, new(Histogram).Quantiles(0.5))
	for _, ns := range []uint64{0, 1, 31, 32, 33, 1000, 1 << 40, 1<<63 - 1} {
		i := bucketOf(ns)
		require.Less(t, i, histBuckets)
		assert.InEpsilon(t, float64(ns)+1, float64(bucketMid(i))+1, 0.04, "%d", ns)
	}
}

func TestHistogramMergeAndCount(t *testing.T) {
	a, b := new(Histogram), new(Histogram)
	for i := 1; i <= 500; i++ {
		a.Record(i, time.Duration(i)*time.Microsecond)
		b.Record(i, time.Duration(500+i)*time.Microsecond)
	}
	a.Merge(b)
	assert.EqualValues(t, 1000, a.Count())
	assert.EqualValues(t, 500, b.Count(), "the merged histogram is left as it was")
	assert.InEpsilon(t, 500*time.Microsecond, a.Quantiles(0.5)[0], 0.04)
	assert.InEpsilon(t, 990*time.Microsecond, a.Quantiles(0.99)[0], 0.04)
}
