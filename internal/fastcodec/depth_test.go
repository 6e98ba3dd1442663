package fastcodec

import (
	"bytes"
	"errors"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"
)

// nestedArrays is a msgpack value nested depth deep: arrays of one, around 1.
func nestedArrays(depth int) []byte {
	return append(bytes.Repeat([]byte{0x91}, depth), 0x01)
}

// TestMsgpackDepthCountsEveryForm: the walk counts the nesting of every
// array and map form, steps over every scalar form, and stops at the
// limit.
func TestMsgpackDepthCountsEveryForm(t *testing.T) {
	enc := func(v any) []byte {
		b, err := share.Codecs[protocol.MsgPack].Encode(v)
		require.NoError(t, err)
		return b
	}
	long := bytes.Repeat([]byte{'x'}, 70000)
	cases := []struct {
		v    any
		want int
	}{
		{1, 0},
		{"s", 0},
		{[]any{}, 0},
		{[]any{1}, 1},
		{map[string]any{"a": []any{1, []any{2}}}, 3},
		{[]any{string(long), long, 1.5, float32(2), int64(-1 << 40), uint64(1 << 63), int8(-5), int16(-300), map[string]any{}}, 1},
		{make([]any, 70000), 1},
		{map[string]any{"k": []any{[]any{[]any{}}}, "l": string(long[:300])}, 3},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, msgpackDepth(enc(tc.v), 100), "%T", tc.v)
	}
	require.Equal(t, 5000, msgpackDepth(nestedArrays(5000), 10000))
	require.Equal(t, 101, msgpackDepth(nestedArrays(1<<20), 100), "stops past the limit")
	// array 16 and map 32 headers nested.
	deep := bytes.Repeat([]byte{0xdc, 0, 1, 0xdf, 0, 0, 0, 1, 0xa1, 'k'}, 3)
	require.Equal(t, 6, msgpackDepth(append(deep, 0xc0), 100))
	// Truncated or malformed: no claim.
	require.Equal(t, 2, msgpackDepth([]byte{0x92, 0x91}, 100))
	require.Equal(t, 0, msgpackDepth([]byte{0xc6, 0xff, 0xff, 0xff, 0xff}, 100))
}

// TestDecodeRefusesDeepNesting: a payload nested beyond MaxDepth is
// refused with ErrTooDeep before any decoder runs, for a struct (whose
// unknown field the library would skip by recursion), any and a slice;
// one nested MaxDepth deep decodes.
func TestDecodeRefusesDeepNesting(t *testing.T) {
	type args struct{ A, B int }
	deep := append([]byte{0x81, 0xa1, 'X'}, nestedArrays(1<<20)...)
	var a args
	require.True(t, errors.Is(Decode(protocol.MsgPack, deep, &a), ErrTooDeep))
	var v any
	require.True(t, errors.Is(Decode(protocol.MsgPack, nestedArrays(MaxDepth+1), &v), ErrTooDeep))
	var s []any
	require.True(t, errors.Is(DecodeShared(protocol.MsgPack, nestedArrays(1<<20), &s), ErrTooDeep))
	require.NoError(t, Decode(protocol.MsgPack, nestedArrays(MaxDepth), &v))
	require.NoError(t, CheckDepth(nestedArrays(MaxDepth)))
}
