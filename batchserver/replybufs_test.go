package batchserver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFreshReplyBufferSizedByRecentReplies: a connection out of free
// buffers makes a fresh one the size its recent replies needed, with some
// room, rather than a fixed 512 bytes: at 10,000 callers the fresh buffers
// of ~220-byte replies were the largest live item at the server's peak.
// Before any reply it starts at newReplyBufCap, and a large reply never
// makes fresh buffers larger than those kept.
func TestFreshReplyBufferSizedByRecentReplies(t *testing.T) {
	var r replyBufs
	require.Equal(t, newReplyBufCap, cap(r.get()), "before any reply")

	// A frame of ~220-byte replies whose buffers are not kept (too big).
	r.putPayloads([][]byte{make([]byte, 200, 8<<10), make([]byte, 220, 8<<10)})
	b := r.get()
	require.GreaterOrEqual(t, cap(b), 220, "room for the recent replies")
	require.Less(t, cap(b), 320, "sized by the recent replies, not fixed at %d", newReplyBufCap)

	r.putPayloads([][]byte{make([]byte, 6<<10, 8<<10)})
	require.LessOrEqual(t, cap(r.get()), maxKeptReplyBuf, "never larger than a kept buffer")
}
