package codec

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Boundary values of the msgpack length and integer encodings.
var (
	strLens     = []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	payloadLens = []int{0, 1, 255, 256, 65535, 65536, 1 << 20}
	countLens   = []int{0, 1, 15, 16, 65535, 65536}
	uintValues  = []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxUint64}
	intValues   = []int64{
		math.MinInt64, math.MinInt32, -129, -128, -33, -32, -1,
		0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxInt64,
	}
)

// pattern returns n bytes of a repeating, position-dependent pattern, so a
// decoder that returns the wrong slice of the frame is caught.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

// str returns a string of n bytes that starts with tag.
func str(tag string, n int) string {
	if n <= len(tag) {
		return tag[:n]
	}
	return tag + strings.Repeat("x", n-len(tag))
}

// sampleEntry returns a fully populated entry; i varies its fields.
func sampleEntry(i int) Entry {
	kinds := []Kind{KindCall, KindCast, KindSend}
	e := Entry{
		Kind:          kinds[i%len(kinds)],
		ID:            uint64(i)*0x10001 + 1,
		ServicePath:   "Arith",
		ServiceMethod: "Mul",
		SerializeType: uint8(i % 5),
		Payload:       pattern(16 + i%7),
		TimeoutMicros: int64(i)*1000 - 500,
	}
	if i%2 == 0 {
		e.Metadata = map[string]string{"trace": "abc", "i": str("v", i%40)}
	}
	if e.Kind != KindCall {
		e.ID = 0
	}
	return e
}

// sampleReply returns a fully populated reply; i varies its fields.
func sampleReply(i int) Reply {
	rp := Reply{ID: uint64(i)*0x10001 + 1, Payload: pattern(8 + i%9)}
	if i%3 == 1 {
		rp.Status = StatusError
		rp.Error = "boom " + str("e", i%40)
	}
	if i%2 == 0 {
		rp.Metadata = map[string]string{"k": "v"}
	}
	return rp
}

func encodeBatch(frameSeq uint64, entries []Entry) []byte {
	b := AppendBatchHeader(nil, frameSeq, len(entries))
	for i := range entries {
		b = AppendEntry(b, &entries[i])
	}
	return b
}

func encodeReplies(incarnation uint64, replies []Reply) []byte {
	b := AppendReplyHeader(nil, incarnation, len(replies))
	for i := range replies {
		b = AppendReply(b, &replies[i])
	}
	return b
}

// normEntry maps the representations the decoder is free to choose (nil or
// empty metadata and payload) to one, so entries compare with Equal.
func normEntry(e Entry) Entry {
	if len(e.Metadata) == 0 {
		e.Metadata = nil
	}
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
	return e
}

func normReply(rp Reply) Reply {
	if len(rp.Metadata) == 0 {
		rp.Metadata = nil
	}
	if len(rp.Payload) == 0 {
		rp.Payload = nil
	}
	return rp
}

func requireEntriesEqual(t testing.TB, want, got []Entry) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := normEntry(want[i]), normEntry(got[i])
		// Compare payloads and metadata separately first so a mismatch in a
		// 1 MiB payload does not print the whole thing twice.
		require.True(t, bytes.Equal(w.Payload, g.Payload), "entry %d payload: %d vs %d bytes", i, len(w.Payload), len(g.Payload))
		require.Equal(t, len(w.Metadata), len(g.Metadata), "entry %d metadata size", i)
		w.Payload, g.Payload = nil, nil
		require.Equal(t, w, g, "entry %d", i)
	}
}

func requireRepliesEqual(t testing.TB, want, got []Reply) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := normReply(want[i]), normReply(got[i])
		require.True(t, bytes.Equal(w.Payload, g.Payload), "reply %d payload: %d vs %d bytes", i, len(w.Payload), len(g.Payload))
		require.Equal(t, len(w.Metadata), len(g.Metadata), "reply %d metadata size", i)
		w.Payload, g.Payload = nil, nil
		require.Equal(t, w, g, "reply %d", i)
	}
}

// aliases reports whether p lies inside frame (decoded payloads must alias
// the frame rather than copy it).
func aliases(frame, p []byte) bool {
	if len(p) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(frame)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return at >= lo && at+uintptr(len(p)) <= lo+uintptr(len(frame))
}
