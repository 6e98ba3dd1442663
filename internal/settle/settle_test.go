package settle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// counter is a queue length that grows by step each time it is read.
type counter struct{ n, step, reads int }

func (c *counter) queued() int { c.reads++; c.n += c.step; return c.n }

// Settle stops at the first yield that sees the queue not grown, unless
// work is on its way; it yields at most MaxYields times, and not at all
// once the queue is full.
func TestSettle(t *testing.T) {
	still := &counter{}
	Settle(still.queued, 100, nil)
	assert.Equal(t, 2, still.reads, "one yield, then no growth")

	growing := &counter{step: 1}
	Settle(growing.queued, 1000, nil)
	assert.Equal(t, 1+MaxYields, growing.reads, "bounded while it grows")

	onTheWay := &counter{}
	Settle(onTheWay.queued, 100, func() int { return 3 })
	assert.Equal(t, 1+MaxYields, onTheWay.reads, "keeps yielding while work is on its way")

	arrived := &counter{}
	Settle(arrived.queued, 100, func() int { return 0 })
	assert.Equal(t, 2, arrived.reads)

	full := &counter{step: 10}
	Settle(full.queued, 10, func() int { return 5 })
	assert.Equal(t, 1, full.reads, "a full queue goes at once")
}
