package lane_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// What a lane's writer sends at once under a byte window: entries while
// the frame (header included) fits beside the bytes in flight; one entry
// of any size when nothing is in flight; everything (within the frame
// cap) when the server granted no byte window, as with an older server.
func TestByteWindowFit(t *testing.T) {
	const h = lane.MaxBatchHeader
	for _, tc := range []struct {
		name             string
		limit, inflight  int64
		frameBytes, want int
		sizes            []int
	}{
		{"no window", 0, 1 << 30, 1 << 20, 3, []int{100, 100, 100}},
		{"no window, frame cap", 0, 0, 250, 2, []int{100, 100, 100}},
		{"fits", 1000, 0, 1 << 20, 3, []int{100, 100, 100}},
		{"fits exactly", 300 + h, 0, 1 << 20, 3, []int{100, 100, 100}},
		{"one byte short", 300 + h - 1, 0, 1 << 20, 2, []int{100, 100, 100}},
		{"beside in flight", 1000, 700, 1 << 20, 2, []int{100, 100, 100}},
		{"full", 1000, 950, 1 << 20, 0, []int{100}},
		{"lone entry beyond the window", 1000, 0, 1 << 20, 1, []int{5000, 1}},
		{"large entry waits while others are in flight", 1000, 1, 1 << 20, 0, []int{5000}},
	} {
		got := lane.ByteWindowFit(tc.limit, tc.inflight, tc.frameBytes, tc.sizes...)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// A writer that held back a Call's entry unencoded while the window was
// full, and finds the window empty when it fits (the last credit came in
// between), encodes and writes it: no credit is on its way to wake it. It
// waited (TestBytesInFlightStayWithinTheWindow hung once in about 90 runs,
// 45 of 200 callers to their deadline). With bytes still in flight and no
// room, it waits for their credit.
func TestByteWindowWriterDoesNotWaitWithRoom(t *testing.T) {
	assert.False(t, lane.ByteWindowWriterWaits(1000, 0), "window empty")
	assert.False(t, lane.ByteWindowWriterWaits(1000, 500), "room left")
	assert.True(t, lane.ByteWindowWriterWaits(1000, 1000), "window full")
}
