package codec

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// call runs f and turns a panic into a test failure that names the input.
func call(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s panicked: %v", what, p)
		}
	}()
	return f()
}

func decodeBatchErr(b []byte) error {
	_, _, err := DecodeBatch(b, 0)
	return err
}

func decodeRepliesErr(b []byte) error {
	_, _, err := DecodeReplies(b, 0, nil)
	return err
}

func decodeHandshakeErr(b []byte) error {
	_, err := DecodeHandshake(b)
	return err
}

// Every strict prefix of a valid frame is malformed. The three-index slice
// makes sure the decoder cannot peek past the cut.
func requirePrefixesMalformed(t *testing.T, frame []byte, decode func([]byte) error) {
	t.Helper()
	require.NoError(t, decode(frame), "the whole frame is valid")
	for i := 0; i < len(frame); i++ {
		err := call(t, fmt.Sprintf("prefix %d of %d", i, len(frame)), func() error { return decode(frame[:i:i]) })
		require.ErrorIs(t, err, ErrMalformed, "prefix %d of %d", i, len(frame))
	}
}

func TestTruncatedBatch(t *testing.T) {
	entries := []Entry{sampleEntry(0), sampleEntry(1), sampleEntry(2)}
	entries[0].ServicePath = str("p", 40)    // str8
	entries[1].Payload = pattern(300)        // bin16
	entries[2].TimeoutMicros = math.MinInt64 // int64
	entries[2].ID = math.MaxUint64           // uint64
	requirePrefixesMalformed(t, encodeBatch(math.MaxUint32, entries), decodeBatchErr)
	requirePrefixesMalformed(t, encodeBatch(0, nil), decodeBatchErr)
}

func TestTruncatedReplies(t *testing.T) {
	replies := []Reply{sampleReply(0), sampleReply(1), sampleReply(2)}
	replies[1].Error = str("e", 300)
	replies[2].ID = 1 << 40
	requirePrefixesMalformed(t, encodeReplies(1<<20, replies), decodeRepliesErr)
	requirePrefixesMalformed(t, encodeReplies(0, nil), decodeRepliesErr)
}

func TestTruncatedHandshake(t *testing.T) {
	h := sampleHandshake()
	requirePrefixesMalformed(t, AppendHandshake(nil, &h), decodeHandshakeErr)
}

func TestTrailingBytes(t *testing.T) {
	h := sampleHandshake()
	for name, c := range map[string]struct {
		frame  []byte
		decode func([]byte) error
	}{
		"batch":     {encodeBatch(1, []Entry{sampleEntry(0)}), decodeBatchErr},
		"batch0":    {encodeBatch(1, nil), decodeBatchErr},
		"replies":   {encodeReplies(1, []Reply{sampleReply(0)}), decodeRepliesErr},
		"handshake": {AppendHandshake(nil, &h), decodeHandshakeErr},
	} {
		for _, tail := range [][]byte{{0}, {0xc0}, c.frame} {
			err := c.decode(append(bytes.Clone(c.frame), tail...))
			require.ErrorIs(t, err, ErrMalformed, "%s + % x", name, tail)
		}
	}
}

// frameHead writes a batch or reply frame header by hand, any version.
func frameHead(version, seq uint64, n int) []byte {
	return appendArrayLen(appendUint(appendUint(appendArrayLen(nil, 3), version), seq), n)
}

func TestWrongVersion(t *testing.T) {
	for _, v := range []uint64{0, 2, 255, math.MaxUint64} {
		e := sampleEntry(0)
		batch := AppendEntry(frameHead(v, 1, 1), &e)
		rp := sampleReply(0)
		replies := AppendReply(frameHead(v, 1, 1), &rp)
		require.ErrorIs(t, decodeBatchErr(batch), ErrVersion, "version %d", v)
		require.ErrorIs(t, decodeRepliesErr(replies), ErrVersion, "version %d", v)
		require.NotErrorIs(t, decodeBatchErr(batch), ErrMalformed)
	}
}

func TestTooManyEntries(t *testing.T) {
	entries := make([]Entry, 17)
	replies := make([]Reply, 17)
	for i := range entries {
		entries[i] = sampleEntry(i)
		replies[i] = sampleReply(i)
	}
	_, _, err := DecodeBatch(encodeBatch(1, entries), 16)
	require.ErrorIs(t, err, ErrTooManyEntries)
	_, _, err = DecodeReplies(encodeReplies(1, replies), 16, nil)
	require.ErrorIs(t, err, ErrTooManyEntries)
}

func TestUnknownEntryKind(t *testing.T) {
	for _, k := range []Kind{0, 4, 255} {
		e := sampleEntry(0)
		e.Kind = k
		err := decodeBatchErr(encodeBatch(1, []Entry{sampleEntry(1), e}))
		require.ErrorIs(t, err, ErrMalformed, "kind %d", k)
		assert.Contains(t, err.Error(), fmt.Sprintf("unknown entry kind %d", k))
	}
}

// entryBytes builds one entry field by field, so each can be swapped for
// something malformed. The defaults are a valid minimal entry.
type entryBytes struct {
	head, kind, id, path, method, meta, st, payload, timeout []byte
}

func validEntryBytes() entryBytes {
	return entryBytes{
		head: []byte{0x98}, kind: []byte{1}, id: []byte{7}, path: []byte{0xa1, 'p'}, method: []byte{0xa1, 'm'},
		meta: []byte{0x81, 0xa1, 'k', 0xa1, 'v'}, st: []byte{0}, payload: []byte{0xc4, 1, 'x'}, timeout: []byte{0xff},
	}
}

func (e entryBytes) frame() []byte {
	b := frameHead(Version, 1, 1)
	for _, f := range [][]byte{e.head, e.kind, e.id, e.path, e.method, e.meta, e.st, e.payload, e.timeout} {
		b = append(b, f...)
	}
	return b
}

func TestMalformedEntryFields(t *testing.T) {
	require.NoError(t, decodeBatchErr(validEntryBytes().frame()))
	u32 := func(c byte, n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{c}, n) }
	cases := map[string]func(e *entryBytes){
		"7 fields":              func(e *entryBytes) { e.head = []byte{0x97} },
		"9 fields":              func(e *entryBytes) { e.head = []byte{0x99} },
		"entry is a map":        func(e *entryBytes) { e.head = []byte{0x88} },
		"kind as string":        func(e *entryBytes) { e.kind = []byte{0xa1, '1'} },
		"kind negative":         func(e *entryBytes) { e.kind = []byte{0xff} },
		"kind nil":              func(e *entryBytes) { e.kind = []byte{0xc0} },
		"id negative":           func(e *entryBytes) { e.id = []byte{0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff} },
		"id float":              func(e *entryBytes) { e.id = []byte{0xca, 0, 0, 0, 0} },
		"path as bin":           func(e *entryBytes) { e.path = []byte{0xc4, 1, 'p'} },
		"path str16 overrun":    func(e *entryBytes) { e.path = []byte{0xda, 0x01, 0x00, 'p'} },
		"path str32 huge":       func(e *entryBytes) { e.path = u32(0xdb, 0xFFFFFFF0) },
		"method int":            func(e *entryBytes) { e.method = []byte{1} },
		"meta as array":         func(e *entryBytes) { e.meta = []byte{0x92, 0xa1, 'k', 0xa1, 'v'} },
		"meta int key":          func(e *entryBytes) { e.meta = []byte{0x81, 0x01, 0xa1, 'v'} },
		"meta bin value":        func(e *entryBytes) { e.meta = []byte{0x81, 0xa1, 'k', 0xc4, 1, 'v'} },
		"meta map32 huge":       func(e *entryBytes) { e.meta = u32(0xdf, 0xFFFFFFF0) },
		"meta nil":              func(e *entryBytes) { e.meta = []byte{0xc0} },
		"serialize type 256":    func(e *entryBytes) { e.st = []byte{0xcd, 0x01, 0x00} },
		"serialize type max":    func(e *entryBytes) { e.st = []byte{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff} },
		"payload as str":        func(e *entryBytes) { e.payload = []byte{0xa1, 'x'} },
		"payload nil":           func(e *entryBytes) { e.payload = []byte{0xc0} },
		"payload bin16 overrun": func(e *entryBytes) { e.payload = []byte{0xc5, 0x00, 0x10, 'x'} },
		"payload bin32 huge":    func(e *entryBytes) { e.payload = u32(0xc6, 0xFFFFFFF0) },
		"timeout above int64":   func(e *entryBytes) { e.timeout = []byte{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0} },
		"timeout int8 form":     func(e *entryBytes) { e.timeout = []byte{0xd0, 0x80} },
		"timeout string":        func(e *entryBytes) { e.timeout = []byte{0xa0} },
		"timeout missing":       func(e *entryBytes) { e.timeout = nil },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			e := validEntryBytes()
			mod(&e)
			err := call(t, name, func() error { return decodeBatchErr(e.frame()) })
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
}

func TestMalformedFrameShapes(t *testing.T) {
	valid := encodeBatch(1, []Entry{sampleEntry(0)})
	cases := map[string]struct {
		b      []byte
		decode func([]byte) error
	}{
		"batch top array of 2":   {append([]byte{0x92}, valid[1:]...), decodeBatchErr},
		"batch top array of 4":   {append([]byte{0x94}, valid[1:]...), decodeBatchErr},
		"batch top map":          {append([]byte{0x83}, valid[1:]...), decodeBatchErr},
		"batch list is a map":    {append(frameHead(Version, 1, 0)[:3], 0x80), decodeBatchErr},
		"batch seq negative":     {[]byte{0x93, 0x01, 0xff, 0x90}, decodeBatchErr},
		"batch list overrun":     {append(frameHead(Version, 1, 2), valid[4:]...), decodeBatchErr},
		"batch array16 overrun":  {append(frameHead(Version, 1, 0)[:3], 0xdc, 0x01, 0x00, 0x90), decodeBatchErr},
		"replies top array of 2": {[]byte{0x92, 0x01, 0x00}, decodeRepliesErr},
		"reply 4 fields":         {append(frameHead(Version, 1, 1), 0x94, 0x01, 0x00, 0xa0, 0x80), decodeRepliesErr},
		"reply error as bin":     {append(frameHead(Version, 1, 1), 0x95, 0x01, 0x01, 0xc4, 0x00, 0x80, 0xc4, 0x00), decodeRepliesErr},
		"reply payload as str":   {append(frameHead(Version, 1, 1), 0x95, 0x01, 0x00, 0xa0, 0x80, 0xa0), decodeRepliesErr},
		"reply status 2":         {append(frameHead(Version, 1, 1), 0x95, 0x01, 0x02, 0xa0, 0x80, 0xc4, 0x00), decodeRepliesErr},
	}
	for name, c := range cases {
		err := call(t, name, func() error { return c.decode(c.b) })
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

// A length field declaring far more than the frame holds is refused before
// anything is allocated for it.
func TestHugeDeclaredLengthsDoNotAllocate(t *testing.T) {
	u32 := func(c byte) []byte { return binary.BigEndian.AppendUint32([]byte{c}, 0xFFFFFFF0) }
	pad := make([]byte, 64) // some bytes after the header, nowhere near 4 GiB
	withEntry := func(mod func(e *entryBytes)) []byte {
		e := validEntryBytes()
		mod(&e)
		return append(e.frame(), pad...)
	}
	reply := func(fields ...byte) []byte {
		return append(append(frameHead(Version, 1, 1), fields...), pad...)
	}
	cases := map[string]struct {
		b      []byte
		decode func([]byte) error
	}{
		"entry list array32":  {append(append(frameHead(Version, 1, 0)[:3], u32(0xdd)...), pad...), decodeBatchErr},
		"service path str32":  {withEntry(func(e *entryBytes) { e.path = u32(0xdb) }), decodeBatchErr},
		"method str32":        {withEntry(func(e *entryBytes) { e.method = u32(0xdb) }), decodeBatchErr},
		"metadata map32":      {withEntry(func(e *entryBytes) { e.meta = u32(0xdf) }), decodeBatchErr},
		"meta key str32":      {withEntry(func(e *entryBytes) { e.meta = append([]byte{0x81}, u32(0xdb)...) }), decodeBatchErr},
		"payload bin32":       {withEntry(func(e *entryBytes) { e.payload = u32(0xc6) }), decodeBatchErr},
		"entry array32":       {withEntry(func(e *entryBytes) { e.head = u32(0xdd) }), decodeBatchErr},
		"reply list array32":  {append(append(frameHead(Version, 1, 0)[:3], u32(0xdd)...), pad...), decodeRepliesErr},
		"reply error str32":   {reply(append([]byte{0x95, 0x01, 0x01}, u32(0xdb)...)...), decodeRepliesErr},
		"reply meta map32":    {reply(append([]byte{0x95, 0x01, 0x01, 0xa0}, u32(0xdf)...)...), decodeRepliesErr},
		"reply payload bin32": {reply(append([]byte{0x95, 0x01, 0x01, 0xa0, 0x80}, u32(0xc6)...)...), decodeRepliesErr},
		"handshake array32":   {append(u32(0xdd), pad...), decodeHandshakeErr},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, c.decode(c.b), ErrMalformed)
			allocs := testing.AllocsPerRun(20, func() { _ = c.decode(c.b) })
			// The error value and its formatted text, and at most one small
			// entry slice: a handful of allocations.
			assert.LessOrEqual(t, allocs, 8.0)
			perCall := allocatedBytes(100, func() { _ = c.decode(c.b) }) / 100
			assert.Less(t, perCall, uint64(2048), "bytes allocated per decode")
		})
	}
}

// allocatedBytes returns the heap bytes f allocates over n runs.
func allocatedBytes(n int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// headerOnlyReader serves a message header and fails the test if anything
// reads beyond it.
type headerOnlyReader struct {
	t    *testing.T
	head []byte
}

func (r *headerOnlyReader) Read(p []byte) (int, error) {
	if len(r.head) == 0 {
		r.t.Errorf("ReadMessage read past the %d header bytes", headerLen)
		return 0, errors.New("read past the header")
	}
	n := copy(p, r.head)
	r.head = r.head[n:]
	return n, nil
}

func rawHeader(h protocol.Header, total uint32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), h[:]...), total)
}

func TestReadMessageTooLarge(t *testing.T) {
	h := sampleHeader(1)
	for _, total := range []uint32{1<<20 + 1, 0x7FFFFFFF, 0xFFFFFFFF} {
		r := &headerOnlyReader{t: t, head: rawHeader(h, total)}
		_, buf, err := ReadMessage(r, 1<<20, nil)
		require.ErrorIs(t, err, ErrFrameTooLarge, "total %d", total)
		assert.Nil(t, buf, "no buffer allocated for a refused message")
	}
	perCall := allocatedBytes(50, func() {
		_, _, _ = ReadMessage(&headerOnlyReader{t: t, head: rawHeader(h, 0xFFFFFFFF)}, 1<<20, nil)
	}) / 50
	assert.Less(t, perCall, uint64(2048))
}

func TestReadMessageBadMagic(t *testing.T) {
	for _, magic := range []byte{0x00, 0x09, 0xff} {
		h := sampleHeader(1)
		h[0] = magic
		// Nothing past the header is read either.
		_, _, err := ReadMessage(&headerOnlyReader{t: t, head: rawHeader(h, 10)}, 1<<20, nil)
		require.ErrorIs(t, err, ErrMalformed, "magic 0x%02x", magic)
	}
}

func TestReadMessageTruncated(t *testing.T) {
	h := sampleHeader(1)
	b := AppendMessage(nil, &h, "Arith", "Mul", map[string]string{"k": "v"}, pattern(50))
	_, _, err := ReadMessage(bytes.NewReader(nil), 1<<20, nil)
	require.ErrorIs(t, err, io.EOF, "an empty stream is a clean EOF")
	for i := 1; i < len(b); i++ {
		err := call(t, fmt.Sprint(i), func() error {
			_, _, err := ReadMessage(bytes.NewReader(b[:i:i]), 1<<20, nil)
			return err
		})
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "prefix %d of %d", i, len(b))
	}
	// A reader that fails mid-body passes its error through.
	boom := errors.New("boom")
	_, _, err = ReadMessage(io.MultiReader(bytes.NewReader(b[:20]), iotestErrReader{boom}), 1<<20, nil)
	require.ErrorIs(t, err, boom)
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// lv is a 4-byte big-endian length and the bytes, rpcx's body encoding.
func lv(p []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...) }

func u32be(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestReadMessageMalformedBody(t *testing.T) {
	path, method := lv([]byte("p")), lv([]byte("m"))
	meta := cat(lv([]byte("k")), lv([]byte("v")))
	payload := lv([]byte("x"))
	h := sampleHeader(1)
	gz := h
	gz.SetCompressType(protocol.Gzip)
	unknownZip := h
	unknownZip.SetCompressType(protocol.CompressType(5))
	require.Nil(t, protocol.Compressors[unknownZip.CompressType()], "compress type 5 is unregistered")

	// The valid body, for reference.
	valid := cat(path, method, lv(meta), payload)
	msg := readOne(t, cat(rawHeader(h, uint32(len(valid))), valid))
	assert.Equal(t, map[string]string{"k": "v"}, msg.Metadata)

	cases := []struct {
		name string
		h    protocol.Header
		body []byte
	}{
		{"empty body", h, nil},
		{"path length short", h, []byte{0, 0, 1}},
		{"path overrun", h, cat(u32be(100), []byte("p"))},
		{"path huge", h, cat(u32be(0xFFFFFFFF), []byte("p"))},
		{"method missing", h, path},
		{"method overrun", h, cat(path, u32be(5), []byte("m"))},
		{"metadata missing", h, cat(path, method)},
		{"metadata overrun", h, cat(path, method, u32be(uint32(len(meta)+1)), meta)},
		{"metadata huge", h, cat(path, method, u32be(0xFFFFFFF0), meta, payload)},
		{"metadata key overrun", h, cat(path, method, lv(cat(u32be(9), []byte("k"))), payload)},
		{"metadata key length short", h, cat(path, method, lv([]byte{0, 0}), payload)},
		{"metadata value missing", h, cat(path, method, lv(lv([]byte("k"))), payload)},
		{"metadata value overrun", h, cat(path, method, lv(cat(lv([]byte("k")), u32be(3), []byte("v"))), payload)},
		{"metadata value length short", h, cat(path, method, lv(cat(lv([]byte("k")), []byte{0})), payload)},
		{"payload missing", h, cat(path, method, lv(meta))},
		{"payload overrun", h, cat(path, method, lv(meta), u32be(2), []byte("x"))},
		{"unknown compression", unknownZip, valid},
		{"gzip flag, not gzip", gz, valid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := cat(rawHeader(c.h, uint32(len(c.body))), c.body)
			err := call(t, c.name, func() error {
				_, _, err := ReadMessage(bytes.NewReader(b), 1<<20, nil)
				return err
			})
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
}

// A gzip payload is held to the byte cap after it unpacks, not only on the
// wire: a small bomb is refused with ErrFrameTooLarge.
func TestReadMessageGzipBombRefused(t *testing.T) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err := zw.Write(make([]byte, 8<<20))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetCompressType(protocol.Gzip)
	msg := AppendMessage(nil, &h, "p", "m", nil, zb.Bytes())
	require.Less(t, len(msg), 64<<10)
	_, _, err = ReadMessage(bytes.NewReader(msg), 1<<20, nil)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	// Within the cap it unpacks.
	got, _, err := ReadMessage(bytes.NewReader(msg), 16<<20, nil)
	require.NoError(t, err)
	require.Len(t, got.Payload, 8<<20)
}
