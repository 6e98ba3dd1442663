package batchserver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// A frame's entries decode into a pooled slab with room for a power of
// two of entries; the slab stays whole until the frame's last entry
// finishes, and is then cleared and given back.
func TestFrameSlabReleasedByLastEntry(t *testing.T) {
	entries := []codec.Entry{
		{Kind: codec.KindCall, ID: 1, ServicePath: "S", ServiceMethod: "M", Metadata: map[string]string{"k": "v"}, Payload: []byte{1}},
		{Kind: codec.KindCast, ServicePath: "S", ServiceMethod: "N", Payload: []byte{2}},
		{Kind: codec.KindCall, ID: 2, ServicePath: "S", ServiceMethod: "M", Payload: []byte{3}},
	}
	frame := codec.AppendBatchHeader(nil, 1, len(entries))
	for i := range entries {
		frame = codec.AppendEntry(frame, &entries[i])
	}
	_, got, slab, err := decodeFrame(frame, 0)
	require.NoError(t, err)
	require.NotNil(t, slab)
	require.Len(t, got, 3)
	assert.Equal(t, 4, cap(slab.entries), "room for the next power of two")
	assert.Same(t, &slab.entries[0], &got[0])

	c := &conn{}
	fr := &frameHold{slab: slab}
	fr.left.Store(int32(len(got)))
	backing := slab.entries[:cap(slab.entries)]
	c.frameDone(fr)
	c.frameDone(fr)
	assert.Equal(t, "M", got[2].ServiceMethod, "released before the frame's last entry finished")
	require.NotNil(t, fr.slab)
	c.frameDone(fr)
	assert.Nil(t, fr.slab)
	for i := range backing {
		assert.Zero(t, backing[i], "entry %d not cleared: the pool would keep its metadata", i)
	}
}

// Frames too large for a pooled slab, and empty ones, get none; a frame
// that fails to decode gives its slab back clear.
func TestFrameSlabSizes(t *testing.T) {
	assert.Nil(t, slabFor(0))
	assert.Nil(t, slabFor(1<<maxSlabShift+1))
	for _, n := range []int{1, 2, 3, 16, 17, 1000, 1 << maxSlabShift} {
		s := slabFor(n)
		require.NotNil(t, s, "n=%d", n)
		assert.GreaterOrEqual(t, cap(s.entries), n)
		assert.Less(t, cap(s.entries), 2*n+1, "n=%d: room for the next power of two only", n)
		s.release()
	}

	e := codec.Entry{Kind: codec.KindCall, ID: 1, ServicePath: "S", ServiceMethod: "M", Payload: []byte{1}}
	frame := codec.AppendEntry(codec.AppendBatchHeader(nil, 1, 2), &e)
	frame = codec.AppendEntry(frame, &e)
	_, _, slab, err := decodeFrame(frame[:len(frame)-2], 0)
	require.ErrorIs(t, err, codec.ErrMalformed)
	assert.Nil(t, slab)
}
