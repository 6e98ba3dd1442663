package codec

import (
	"fmt"
	"math"
	"testing"

	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// roundTripBatch encodes entries, decodes them, checks they came back equal
// and that EntrySize bounds every encoded entry, and returns the frame.
func roundTripBatch(t *testing.T, frameSeq uint64, entries []Entry) []byte {
	t.Helper()
	frame := AppendBatchHeader(nil, frameSeq, len(entries))
	for i := range entries {
		before := len(frame)
		frame = AppendEntry(frame, &entries[i])
		require.LessOrEqual(t, len(frame)-before, EntrySize(&entries[i]), "EntrySize must bound entry %d", i)
	}
	gotSeq, got, err := DecodeBatch(frame, 0)
	require.NoError(t, err)
	assert.Equal(t, frameSeq, gotSeq)
	requireEntriesEqual(t, entries, got)
	for i := range got {
		require.True(t, aliases(frame, got[i].Payload), "entry %d payload must alias the frame", i)
	}
	return frame
}

func TestBatchRoundTripSample(t *testing.T) {
	entries := make([]Entry, 20)
	for i := range entries {
		entries[i] = sampleEntry(i)
	}
	frame := roundTripBatch(t, 42, entries)
	// An independent msgpack decoder reads the frame as the wire format
	// says it is laid out: [version, frameSeq, [entry...]], each entry
	// [kind, id, path, method, metadata, serializeType, payload, timeout].
	var wire []any
	require.NoError(t, msgpack.Unmarshal(frame, &wire))
	require.Len(t, wire, 3)
	assert.EqualValues(t, Version, wire[0])
	assert.EqualValues(t, 42, wire[1])
	got, ok := wire[2].([]any)
	require.True(t, ok, "the entries are not an array: %T", wire[2])
	require.Len(t, got, len(entries))
	for i, g := range got {
		f, ok := g.([]any)
		require.True(t, ok, "entry %d is not an array: %T", i, g)
		require.Len(t, f, 8, "entry %d", i)
		e := entries[i]
		assert.EqualValues(t, e.Kind, f[0], "entry %d kind", i)
		assert.EqualValues(t, e.ID, f[1], "entry %d id", i)
		assert.Equal(t, e.ServicePath, f[2], "entry %d path", i)
		assert.Equal(t, e.ServiceMethod, f[3], "entry %d method", i)
		meta := map[string]string{}
		if m, ok := f[4].(map[string]any); ok {
			for k, v := range m {
				meta[k], _ = v.(string)
			}
		}
		assert.Equal(t, len(e.Metadata), len(meta), "entry %d metadata", i)
		for k, v := range e.Metadata {
			assert.Equal(t, v, meta[k], "entry %d metadata %q", i, k)
		}
		assert.EqualValues(t, e.SerializeType, f[5], "entry %d serialize type", i)
		assert.Equal(t, e.Payload, f[6], "entry %d payload", i)
		assert.EqualValues(t, e.TimeoutMicros, f[7], "entry %d timeout", i)
	}
}

func TestBatchRoundTripStringLengths(t *testing.T) {
	for _, n := range strLens {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := sampleEntry(0)
			e.ServicePath = str("path", n)
			e.ServiceMethod = str("method", n)
			e.Metadata = map[string]string{str("key", n): str("value", n)}
			roundTripBatch(t, 1, []Entry{e, sampleEntry(1)})
		})
	}
}

func TestBatchRoundTripPayloadLengths(t *testing.T) {
	for _, n := range payloadLens {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := sampleEntry(1)
			e.Payload = pattern(n)
			// A following entry proves the payload length was honoured.
			roundTripBatch(t, 1, []Entry{e, sampleEntry(2)})
		})
	}
}

func TestBatchRoundTripEntryCounts(t *testing.T) {
	for _, n := range countLens {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			// Cheap entries: about a dozen bytes each.
			entries := make([]Entry, n)
			for i := range entries {
				entries[i] = Entry{Kind: KindCast, ID: uint64(i), TimeoutMicros: -int64(i % 40)}
			}
			roundTripBatch(t, uint64(n), entries)
		})
	}
}

func TestBatchRoundTripIntegers(t *testing.T) {
	for _, v := range uintValues {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			e := sampleEntry(0)
			e.ID = v
			roundTripBatch(t, v, []Entry{e, sampleEntry(3)})
		})
	}
}

func TestBatchRoundTripTimeouts(t *testing.T) {
	for _, v := range intValues {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			e := sampleEntry(0)
			e.TimeoutMicros = v
			roundTripBatch(t, 7, []Entry{e, sampleEntry(1)})
		})
	}
}

func TestBatchRoundTripKindsAndSerializeTypes(t *testing.T) {
	for _, k := range []Kind{KindCall, KindCast, KindSend} {
		for _, st := range []uint8{0, 1, 127, 128, 255} {
			e := sampleEntry(0)
			e.Kind, e.SerializeType = k, st
			roundTripBatch(t, 1, []Entry{e})
		}
	}
}

func TestBatchRoundTripMetadata(t *testing.T) {
	many := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("k%d", i)] = fmt.Sprintf("v%d", i)
		}
		return m
	}
	cases := map[string]map[string]string{
		"nil":         nil,
		"empty":       {},
		"one":         {"a": "b"},
		"empty-kv":    {"": ""},
		"fixmap-max":  many(15),
		"map16-min":   many(16),
		"map16-large": many(1000),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			e := sampleEntry(1)
			e.Metadata = m
			frame := roundTripBatch(t, 1, []Entry{e})
			_, got, err := DecodeBatch(frame, 0)
			require.NoError(t, err)
			require.Len(t, got[0].Metadata, len(m))
			for k, v := range m {
				assert.Equal(t, v, got[0].Metadata[k], "key %q", k)
			}
		})
	}
}

// AppendBatchHeader appends: a frame written after other bytes in the same
// buffer is the suffix.
func TestBatchAppendsToPrefix(t *testing.T) {
	prefix := []byte("prefix bytes")
	entries := []Entry{sampleEntry(0), sampleEntry(1)}
	b := AppendBatchHeader(append([]byte(nil), prefix...), 9, len(entries))
	for i := range entries {
		b = AppendEntry(b, &entries[i])
	}
	require.Equal(t, prefix, b[:len(prefix)])
	require.Equal(t, encodeBatch(9, entries)[:4], b[len(prefix):len(prefix)+4])
	seq, got, err := DecodeBatch(b[len(prefix):], 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(9), seq)
	requireEntriesEqual(t, entries, got)
}

func TestBatchMaxEntries(t *testing.T) {
	entries := []Entry{sampleEntry(0), sampleEntry(1), sampleEntry(2), sampleEntry(3), sampleEntry(4)}
	frame := encodeBatch(1, entries)
	for _, max := range []int{0, -1, 5, 6, math.MaxInt} {
		_, got, err := DecodeBatch(frame, max)
		require.NoError(t, err, "maxEntries %d", max)
		require.Len(t, got, 5)
	}
	for _, max := range []int{1, 4} {
		_, got, err := DecodeBatch(frame, max)
		require.ErrorIs(t, err, ErrTooManyEntries, "maxEntries %d", max)
		require.Nil(t, got)
	}
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "call", KindCall.String())
	assert.Equal(t, "cast", KindCast.String())
	assert.Equal(t, "send", KindSend.String())
	assert.Equal(t, "kind(0)", Kind(0).String())
	assert.Equal(t, "kind(255)", Kind(255).String())
}

// TestServerTimeoutPairDecodesAsRPCXWritesIt checks that an entry with
// ServerTimeout decodes with rpcx's "__ServerTimeout" pair, in the
// milliseconds of the time left: beside other metadata in Metadata, alone
// as the ServerTimeout flag (the map made only on demand), and that a
// value an encoder would not have written for the timeout (another
// client's) is kept as it came. EntrySize bounds what AppendEntry wrote.
func TestServerTimeoutPairDecodesAsRPCXWritesIt(t *testing.T) {
	require.Equal(t, share.ServerTimeout, serverTimeoutKey)
	for _, tc := range []struct {
		meta   map[string]string
		micros int64
		want   string
		flag   bool
	}{
		{nil, 2_500_999, "2500", true},
		{map[string]string{"a": "1", share.AuthKey: "tok"}, 1_000, "1", false},
		{nil, -1, "-1", false},
	} {
		e := Entry{Kind: KindCall, ID: 7, ServicePath: "S", ServiceMethod: "M", Metadata: tc.meta, Payload: []byte{1}, TimeoutMicros: tc.micros, ServerTimeout: true}
		frame := AppendEntry(AppendBatchHeader(nil, 1, 1), &e)
		require.LessOrEqual(t, len(frame)-len(AppendBatchHeader(nil, 1, 1)), EntrySize(&e))
		_, got, err := DecodeBatch(frame, 0)
		require.NoError(t, err)
		require.Equal(t, tc.micros, got[0].TimeoutMicros)
		require.Equal(t, tc.want, got[0].ServerTimeoutValue())
		require.Equal(t, tc.flag, got[0].ServerTimeout)
		want := map[string]string{share.ServerTimeout: tc.want}
		for k, v := range tc.meta {
			want[k] = v
		}
		if tc.flag {
			require.Nil(t, got[0].Metadata)
		} else {
			require.Equal(t, want, got[0].Metadata)
		}
	}
	// Another client's value, not the one the timeout gives: kept.
	e := Entry{Kind: KindCall, ID: 1, ServicePath: "S", ServiceMethod: "M", Metadata: map[string]string{share.ServerTimeout: "9"}, TimeoutMicros: 2_000_000}
	_, got, err := DecodeBatch(AppendEntry(AppendBatchHeader(nil, 1, 1), &e), 0)
	require.NoError(t, err)
	require.False(t, got[0].ServerTimeout)
	require.Equal(t, map[string]string{share.ServerTimeout: "9"}, got[0].Metadata)
}

// TestServerTimeoutValueCheckIsExact: the decoder takes a
// "__ServerTimeout" value for the flag only when it is, byte for byte,
// what the encoder writes for the entry's timeout; any other spelling of
// the same number (a leading zero, a sign), another number, or what is not
// a number stays in the metadata as it came.
func TestServerTimeoutValueCheckIsExact(t *testing.T) {
	for _, micros := range []int64{1, 999, 1_000, 1_999, 2_000, 59_999_999, 60_000_000, 1<<62 + 12_345} {
		v := appendServerTimeoutValue(nil, micros)
		require.True(t, isServerTimeoutValue(v, micros), "%d: %q", micros, v)
		require.False(t, isServerTimeoutValue(v, micros+1000), "%d: %q for another timeout", micros, v)
	}
	for _, raw := range []string{"", "01", "00", "+5", "-5", "5 ", "5a", "٥", "12345678901234567890"} {
		assert.False(t, isServerTimeoutValue([]byte(raw), 5_000), "%q", raw)
	}
	// End to end: an entry whose pair reads "05" for a 5 ms timeout keeps
	// it in its metadata.
	e := Entry{Kind: KindCall, ID: 1, ServicePath: "S", ServiceMethod: "M", Metadata: map[string]string{share.ServerTimeout: "05"}, TimeoutMicros: 5_000}
	_, got, err := DecodeBatch(AppendEntry(AppendBatchHeader(nil, 1, 1), &e), 0)
	require.NoError(t, err)
	require.False(t, got[0].ServerTimeout)
	require.Equal(t, map[string]string{share.ServerTimeout: "05"}, got[0].Metadata)
}

// DecodeBatchTo decodes into the room it is given, cleared first, so a
// slice reused from an earlier frame leaks none of that frame's fields
// into this one's; with too little room, or none, it makes a slice.
func TestDecodeBatchToReusesRoom(t *testing.T) {
	entries := []Entry{
		{Kind: KindCall, ID: 1, ServicePath: "Arith", ServiceMethod: "Mul", Payload: []byte{1}, TimeoutMicros: 5},
		{Kind: KindCast, ServicePath: "Arith", ServiceMethod: "Add", SerializeType: 3, Payload: []byte{2}},
	}
	frame := AppendBatchHeader(nil, 7, len(entries))
	for i := range entries {
		frame = AppendEntry(frame, &entries[i])
	}
	// Room left dirty by an earlier, different frame.
	room := make([]Entry, 4)
	for i := range room {
		room[i] = sampleEntry(100 + i)
		room[i].CompressType = 1
		room[i].ServerTimeout = true
	}
	var asked []int
	seq, got, err := DecodeBatchTo(frame, 0, func(n int) []Entry { asked = append(asked, n); return room[:0] })
	require.NoError(t, err)
	assert.Equal(t, uint64(7), seq)
	assert.Equal(t, []int{2}, asked, "room is asked for once, for the entry count")
	require.Len(t, got, 2)
	assert.Same(t, &room[0], &got[0], "decoded into the room given")
	requireEntriesEqual(t, entries, got)
	for i := range got {
		assert.Zero(t, got[i].CompressType, "entry %d kept a field of the slice's last use", i)
		assert.False(t, got[i].ServerTimeout, "entry %d kept a field of the slice's last use", i)
	}

	_, small, err := DecodeBatchTo(frame, 0, func(int) []Entry { return room[:0:1] })
	require.NoError(t, err)
	assert.NotSame(t, &room[0], &small[0], "too little room: a slice of its own")
	requireEntriesEqual(t, entries, small)

	_, _, err = DecodeBatchTo(frame[:len(frame)-1], 0, func(int) []Entry { return room[:0] })
	require.ErrorIs(t, err, ErrMalformed)
}
