package codec

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func hexb(b ...byte) []byte { return b }

// The encoders must pick the smallest msgpack form at every boundary; the
// expected bytes come from the msgpack spec.
func TestAppendUintForms(t *testing.T) {
	cases := []struct {
		v    uint64
		want []byte
	}{
		{0, hexb(0x00)},
		{127, hexb(0x7f)},
		{128, hexb(0xcc, 0x80)},
		{255, hexb(0xcc, 0xff)},
		{256, hexb(0xcd, 0x01, 0x00)},
		{65535, hexb(0xcd, 0xff, 0xff)},
		{65536, hexb(0xce, 0x00, 0x01, 0x00, 0x00)},
		{1<<32 - 1, hexb(0xce, 0xff, 0xff, 0xff, 0xff)},
		{1 << 32, hexb(0xcf, 0, 0, 0, 1, 0, 0, 0, 0)},
		{math.MaxUint64, hexb(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)},
	}
	for _, c := range cases {
		b := appendUint(nil, c.v)
		require.Equal(t, c.want, b, "appendUint(%d)", c.v)

		r := &reader{b: b}
		got, err := r.uint("v")
		require.NoError(t, err)
		require.Equal(t, c.v, got)
		require.Zero(t, r.left())

		var lib uint64
		require.NoError(t, msgpack.Unmarshal(b, &lib))
		require.Equal(t, c.v, lib, "msgpack library reads appendUint(%d)", c.v)
	}
}

func TestAppendIntForms(t *testing.T) {
	cases := []struct {
		v    int64
		want []byte
	}{
		{-1, hexb(0xff)},
		{-32, hexb(0xe0)},
		{-33, hexb(0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xdf)},
		{math.MinInt64, hexb(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0)},
		{0, hexb(0x00)},
		{128, hexb(0xcc, 0x80)},
		{math.MaxInt64, hexb(0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)},
	}
	for _, c := range cases {
		require.Equal(t, c.want, appendInt(nil, c.v), "appendInt(%d)", c.v)
	}
	for _, v := range intValues {
		b := appendInt(nil, v)
		r := &reader{b: b}
		got, err := r.int("v")
		require.NoError(t, err)
		require.Equal(t, v, got)
		require.Zero(t, r.left())

		var lib int64
		require.NoError(t, msgpack.Unmarshal(b, &lib))
		require.Equal(t, v, lib, "msgpack library reads appendInt(%d)", v)
	}
}

func TestReaderIntRejectsUintAboveMaxInt64(t *testing.T) {
	r := &reader{b: appendUint(nil, math.MaxInt64+1)}
	_, err := r.int("v")
	require.ErrorIs(t, err, ErrMalformed)
}

func TestAppendStrBinForms(t *testing.T) {
	strHead := map[int][]byte{
		0:     hexb(0xa0),
		31:    hexb(0xbf),
		32:    hexb(0xd9, 32),
		255:   hexb(0xd9, 0xff),
		256:   hexb(0xda, 0x01, 0x00),
		65535: hexb(0xda, 0xff, 0xff),
		65536: hexb(0xdb, 0x00, 0x01, 0x00, 0x00),
	}
	binHead := map[int][]byte{
		0:     hexb(0xc4, 0),
		31:    hexb(0xc4, 31),
		32:    hexb(0xc4, 32),
		255:   hexb(0xc4, 0xff),
		256:   hexb(0xc5, 0x01, 0x00),
		65535: hexb(0xc5, 0xff, 0xff),
		65536: hexb(0xc6, 0x00, 0x01, 0x00, 0x00),
	}
	for n, head := range strHead {
		s := str("s", n)
		b := appendStr(nil, s)
		require.Equal(t, head, b[:len(head)], "str %d header", n)
		require.Len(t, b, len(head)+n)
		r := &reader{b: b}
		got, err := r.str("s")
		require.NoError(t, err)
		require.Equal(t, s, got)
		var lib string
		require.NoError(t, msgpack.Unmarshal(b, &lib))
		require.Equal(t, s, lib)
	}
	for n, head := range binHead {
		p := pattern(n)
		b := appendBin(nil, p)
		require.Equal(t, head, b[:len(head)], "bin %d header", n)
		require.Len(t, b, len(head)+n)
		r := &reader{b: b}
		got, err := r.bin("b")
		require.NoError(t, err)
		require.True(t, bytes.Equal(p, got))
		var lib []byte
		require.NoError(t, msgpack.Unmarshal(b, &lib))
		require.True(t, bytes.Equal(p, lib))
	}
}

func TestAppendArrayMapLenForms(t *testing.T) {
	cases := []struct {
		n          int
		arr, mapLn []byte
	}{
		{0, hexb(0x90), hexb(0x80)},
		{15, hexb(0x9f), hexb(0x8f)},
		{16, hexb(0xdc, 0, 16), hexb(0xde, 0, 16)},
		{65535, hexb(0xdc, 0xff, 0xff), hexb(0xde, 0xff, 0xff)},
		{65536, hexb(0xdd, 0, 1, 0, 0), hexb(0xdf, 0, 1, 0, 0)},
	}
	for _, c := range cases {
		a, m := appendArrayLen(nil, c.n), appendMapLen(nil, c.n)
		require.Equal(t, c.arr, a, "array %d", c.n)
		require.Equal(t, c.mapLn, m, "map %d", c.n)

		n, err := msgpack.NewDecoder(bytes.NewReader(a)).DecodeArrayLen()
		require.NoError(t, err)
		require.Equal(t, c.n, n)
		n, err = msgpack.NewDecoder(bytes.NewReader(m)).DecodeMapLen()
		require.NoError(t, err)
		require.Equal(t, c.n, n)

		// The reader refuses lengths the rest cannot hold, so give it room:
		// one byte per array item, two per map pair.
		r := &reader{b: append(a, make([]byte, c.n)...)}
		n, err = r.arrayLen("a")
		require.NoError(t, err)
		require.Equal(t, c.n, n)
		r = &reader{b: append(m, make([]byte, 2*c.n)...)}
		n, err = r.mapLen("m")
		require.NoError(t, err)
		require.Equal(t, c.n, n)
		if c.n > 0 {
			r = &reader{b: append(m, make([]byte, 2*c.n-1)...)}
			_, err = r.mapLen("m")
			require.ErrorIs(t, err, ErrMalformed, "map of %d pairs in %d bytes", c.n, 2*c.n-1)
		}
	}
}

// The decoders read every form of an integer, not only the smallest, since
// any msgpack writer may choose a wider one.
func TestReaderAcceptsWideForms(t *testing.T) {
	wide := [][]byte{
		{0xcc, 5}, {0xcd, 0, 5}, {0xce, 0, 0, 0, 5}, {0xcf, 0, 0, 0, 0, 0, 0, 0, 5},
	}
	for _, b := range wide {
		r := &reader{b: b}
		v, err := r.uint("v")
		require.NoError(t, err)
		require.Equal(t, uint64(5), v)
		r = &reader{b: b}
		i, err := r.int("v")
		require.NoError(t, err)
		require.Equal(t, int64(5), i)
	}
	r := &reader{b: hexb(0xd3, 0, 0, 0, 0, 0, 0, 0, 5)}
	i, err := r.int("v")
	require.NoError(t, err)
	require.Equal(t, int64(5), i)
	for _, b := range [][]byte{{0xd9, 1, 'x'}, {0xda, 0, 1, 'x'}, {0xdb, 0, 0, 0, 1, 'x'}} {
		r := &reader{b: b}
		s, err := r.str("s")
		require.NoError(t, err)
		require.Equal(t, "x", s)
	}
}

// num converts any integer the msgpack library decoded into an interface{}
// (it picks int8, uint16, int64, ... by wire form) to a comparable int64 or
// uint64 by sign.
func num(t *testing.T, v any) any {
	t.Helper()
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if rv.Int() >= 0 {
			return uint64(rv.Int())
		}
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint()
	}
	t.Fatalf("not an integer: %T %v", v, v)
	return nil
}

func libMap(t *testing.T, v any) map[string]string {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "metadata decodes as a map, got %T", v)
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		require.True(t, ok, "metadata value is a string, got %T", v)
		out[k] = s
	}
	return out
}

func requireMetaEqual(t *testing.T, want map[string]string, got map[string]string) {
	t.Helper()
	require.Len(t, got, len(want))
	for k, v := range want {
		require.Equal(t, v, got[k], "metadata %q", k)
	}
}

func libBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, ok := v.([]byte)
	require.True(t, ok, "payload decodes as bin, got %T", v)
	return b
}

// Decoding our frames with an independent msgpack implementation proves they
// are genuine msgpack, laid out as doc.go says.
func TestBatchFrameIsMsgpack(t *testing.T) {
	entries := []Entry{sampleEntry(0), sampleEntry(1), sampleEntry(2)}
	entries[0].Payload = pattern(70000)
	entries[0].ServicePath = str("p", 300)
	entries[1].TimeoutMicros = math.MinInt64
	entries[2].ID = math.MaxUint64
	frame := encodeBatch(1<<40, entries)

	var v any
	require.NoError(t, msgpack.Unmarshal(frame, &v))
	top, ok := v.([]any)
	require.True(t, ok, "frame is an array, got %T", v)
	require.Len(t, top, 3)
	assert.Equal(t, uint64(Version), num(t, top[0]))
	assert.Equal(t, uint64(1<<40), num(t, top[1]))
	list, ok := top[2].([]any)
	require.True(t, ok)
	require.Len(t, list, len(entries))
	for i, raw := range list {
		e := entries[i]
		fields, ok := raw.([]any)
		require.True(t, ok, "entry %d is an array", i)
		require.Len(t, fields, 8)
		assert.Equal(t, uint64(e.Kind), num(t, fields[0]))
		assert.Equal(t, e.ID, num(t, fields[1]))
		assert.Equal(t, e.ServicePath, fields[2])
		assert.Equal(t, e.ServiceMethod, fields[3])
		requireMetaEqual(t, e.Metadata, libMap(t, fields[4]))
		assert.Equal(t, uint64(e.SerializeType), num(t, fields[5]))
		assert.True(t, bytes.Equal(e.Payload, libBytes(t, fields[6])))
		want := any(e.TimeoutMicros)
		if e.TimeoutMicros >= 0 {
			want = uint64(e.TimeoutMicros)
		}
		assert.Equal(t, want, num(t, fields[7]))
	}
}

func TestReplyFrameIsMsgpack(t *testing.T) {
	replies := []Reply{sampleReply(0), sampleReply(1), sampleReply(2)}
	replies[1].Error = str("e", 70000)
	frame := encodeReplies(77, replies)

	var v any
	require.NoError(t, msgpack.Unmarshal(frame, &v))
	top, ok := v.([]any)
	require.True(t, ok, "frame is an array, got %T", v)
	require.Len(t, top, 3)
	assert.Equal(t, uint64(Version), num(t, top[0]))
	assert.Equal(t, uint64(77), num(t, top[1]))
	list, ok := top[2].([]any)
	require.True(t, ok)
	require.Len(t, list, len(replies))
	for i, raw := range list {
		rp := replies[i]
		fields, ok := raw.([]any)
		require.True(t, ok)
		require.Len(t, fields, 5)
		assert.Equal(t, rp.ID, num(t, fields[0]))
		assert.Equal(t, uint64(rp.Status), num(t, fields[1]))
		assert.Equal(t, rp.Error, fields[2])
		requireMetaEqual(t, rp.Metadata, libMap(t, fields[3]))
		assert.True(t, bytes.Equal(rp.Payload, libBytes(t, fields[4])))
	}
}

func TestHandshakeIsMsgpack(t *testing.T) {
	h := sampleHandshake()
	var v []uint64
	require.NoError(t, msgpack.Unmarshal(AppendHandshake(nil, &h), &v))
	assert.Equal(t, []uint64{h.Version, uint64(h.PoolSize), uint64(h.BatchCap), uint64(h.MaxFrameBytes), h.Incarnation, uint64(h.Window)}, v)
}

// The other direction: a frame the msgpack library writes from plain Go
// values (with the forms it prefers) decodes with our reader.
func TestDecodeLibraryWrittenFrames(t *testing.T) {
	payload := pattern(300)
	batch, err := msgpack.Marshal([]any{
		uint64(1), uint64(1 << 33),
		[]any{
			[]any{uint8(KindCall), uint64(12), "Arith", "Mul", map[string]string{"a": "b"}, uint8(3), payload, int64(-7)},
			[]any{uint16(KindSend), uint32(0), str("s", 40), "", map[string]string{}, uint8(0), []byte{}, uint64(1000)},
		},
	})
	require.NoError(t, err)
	seq, entries, err := DecodeBatch(batch, 0)
	require.NoError(t, err, "% x", batch)
	assert.Equal(t, uint64(1<<33), seq)
	requireEntriesEqual(t, []Entry{
		{Kind: KindCall, ID: 12, ServicePath: "Arith", ServiceMethod: "Mul", Metadata: map[string]string{"a": "b"}, SerializeType: 3, Payload: payload, TimeoutMicros: -7},
		{Kind: KindSend, ServicePath: str("s", 40), TimeoutMicros: 1000},
	}, entries)

	replies, err := msgpack.Marshal([]any{
		1, 5,
		[]any{[]any{uint64(9), 1, "bad", map[string]string{"x": "y"}, []byte("r")}},
	})
	require.NoError(t, err)
	inc, got, err := DecodeReplies(replies, 0, nil)
	require.NoError(t, err, "% x", replies)
	assert.Equal(t, uint64(5), inc)
	requireRepliesEqual(t, []Reply{{ID: 9, Status: StatusError, Error: "bad", Metadata: map[string]string{"x": "y"}, Payload: []byte("r")}}, got)
}

func TestEntrySizeBoundsAppendEntry(t *testing.T) {
	// Worst cases for every variable-width field at once.
	e := Entry{
		Kind: Kind(255), ID: math.MaxUint64, SerializeType: 255, TimeoutMicros: math.MinInt64,
		ServicePath: str("p", 65536), ServiceMethod: str("m", 65536), Payload: pattern(65536),
		Metadata: make(map[string]string),
	}
	for i := 0; i < 70000; i++ {
		e.Metadata[fmt.Sprint(i)] = ""
	}
	assert.LessOrEqual(t, len(AppendEntry(nil, &e)), EntrySize(&e))
	rp := Reply{ID: math.MaxUint64, Status: 255, Error: str("e", 65536), Payload: pattern(65536), Metadata: e.Metadata}
	assert.LessOrEqual(t, len(AppendReply(nil, &rp)), ReplySize(&rp))
}
