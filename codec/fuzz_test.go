package codec

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"
)

// The seeds below are valid frames with every encoding form the writers
// produce, plus a few broken ones. The same frames are committed under
// testdata/fuzz/<FuzzName>/ so plain `go test` runs them too.

func seedBatchFrames() map[string][]byte {
	mixed := []Entry{sampleEntry(0), sampleEntry(1), sampleEntry(2)}
	mixed[0].ServicePath = str("p", 40)
	mixed[1].Payload = pattern(300)
	mixed[1].Metadata = map[string]string{"k": "v"}
	mixed[2].TimeoutMicros = math.MinInt64
	mixed[2].ID = math.MaxUint64
	valid := encodeBatch(7, mixed)
	return map[string][]byte{
		"valid":     valid,
		"empty":     encodeBatch(0, nil),
		"one":       encodeBatch(1, []Entry{{Kind: KindCast, TimeoutMicros: -1}}),
		"truncated": valid[:len(valid)/2],
		"version2":  AppendEntry(frameHead(2, 1, 1), &mixed[0]),
		"nothing":   {},
	}
}

func seedReplyFrames() map[string][]byte {
	replies := []Reply{sampleReply(0), sampleReply(1), sampleReply(2)}
	replies[1].Error = str("e", 40)
	replies[2].Payload = pattern(300)
	replies[0].Metadata = map[string]string{"k": "v"}
	valid := encodeReplies(1<<40, replies)
	return map[string][]byte{
		"valid":     valid,
		"empty":     encodeReplies(0, nil),
		"one":       encodeReplies(1, []Reply{{ID: 1, Status: StatusError, Error: "boom"}}),
		"truncated": valid[:len(valid)/2],
		"trailing":  append(encodeReplies(1, nil), 0),
		"nothing":   {},
	}
}

func seedHandshakes() map[string][]byte {
	h := sampleHandshake()
	valid := AppendHandshake(nil, &h)
	small := Handshake{Version: Version, PoolSize: 1, BatchCap: 1, MaxFrameBytes: 1, Window: 1}
	zero := Handshake{Version: Version}
	return map[string][]byte{
		"valid":     valid,
		"small":     AppendHandshake(nil, &small),
		"zero":      AppendHandshake(nil, &zero),
		"truncated": valid[:len(valid)-3],
		"nothing":   {},
	}
}

func seedMessages() map[string][]byte {
	h := sampleHeader(42)
	valid := AppendMessage(nil, &h, "Arith", "Mul", map[string]string{"k": "v"}, []byte("payload"))
	gz := sampleHeader(43)
	gz.SetCompressType(protocol.Gzip)
	hb := sampleHeader(44)
	hb.SetHeartbeat(true)
	return map[string][]byte{
		"valid":     valid,
		"gzip":      rpcxEncode(gz, "p", "m", nil, bytes.Repeat([]byte("ab"), 50)),
		"heartbeat": AppendMessage(nil, &hb, "", "", nil, nil),
		"batch":     AppendMessage(nil, &h, ServicePath, MethodBatch, nil, encodeBatch(1, []Entry{sampleEntry(0)})),
		"truncated": valid[:len(valid)-3],
		"nothing":   {},
	}
}

func addSeeds(f *testing.F, seeds map[string][]byte) {
	// In name order, so the seed#N numbering is stable.
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
}

func FuzzDecodeBatch(f *testing.F) {
	addSeeds(f, seedBatchFrames())
	f.Fuzz(func(t *testing.T, data []byte) {
		seq, entries, err := DecodeBatch(data, 0)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			require.Nil(t, entries)
			return
		}
		// The entry cap is exact.
		_, _, err = DecodeBatch(data, len(entries))
		require.NoError(t, err)
		if len(entries) > 1 {
			_, _, err = DecodeBatch(data, len(entries)-1)
			require.ErrorIs(t, err, ErrTooManyEntries)
		}

		// Re-encoding gives the canonical, never longer, form, which decodes
		// to the same frame.
		re := AppendBatchHeader(nil, seq, len(entries))
		for i := range entries {
			before := len(re)
			re = AppendEntry(re, &entries[i])
			require.LessOrEqual(t, len(re)-before, EntrySize(&entries[i]))
		}
		require.LessOrEqual(t, len(re), len(data))
		seq2, entries2, err := DecodeBatch(re, 0)
		require.NoError(t, err)
		require.Equal(t, seq, seq2)
		requireEntriesEqual(t, entries, entries2)
		for i := range entries {
			require.Equal(t, entries[i].Metadata, entries2[i].Metadata)
		}
	})
}

func FuzzDecodeReplies(f *testing.F) {
	addSeeds(f, seedReplyFrames())
	f.Fuzz(func(t *testing.T, data []byte) {
		inc, replies, err := DecodeReplies(data, 0, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			require.Nil(t, replies)
			return
		}
		// Decoding into a dirty, reused dst gives the same replies.
		stale := make([]Reply, 4)
		for i := range stale {
			stale[i] = Reply{ID: 99, Status: StatusError, Error: "stale", Metadata: map[string]string{"s": "s"}, Payload: []byte("s")}
		}
		_, again, err := DecodeReplies(data, 0, stale[:0])
		require.NoError(t, err)
		requireRepliesEqual(t, replies, again)
		for i := range replies {
			require.Equal(t, replies[i], again[i])
		}
		if len(replies) > 1 {
			_, _, err = DecodeReplies(data, len(replies)-1, nil)
			require.ErrorIs(t, err, ErrTooManyEntries)
		}

		re := AppendReplyHeader(nil, inc, len(replies))
		for i := range replies {
			before := len(re)
			re = AppendReply(re, &replies[i])
			require.LessOrEqual(t, len(re)-before, ReplySize(&replies[i]))
		}
		require.LessOrEqual(t, len(re), len(data))
		inc2, replies2, err := DecodeReplies(re, 0, nil)
		require.NoError(t, err)
		require.Equal(t, inc, inc2)
		requireRepliesEqual(t, replies, replies2)
		for i := range replies {
			require.Equal(t, replies[i].Metadata, replies2[i].Metadata)
		}
	})
}

func FuzzDecodeHandshake(f *testing.F) {
	addSeeds(f, seedHandshakes())
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHandshake(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		require.Positive(t, h.PoolSize)
		require.Positive(t, h.BatchCap)
		require.Positive(t, h.MaxFrameBytes)
		re := AppendHandshake(nil, &h)
		require.LessOrEqual(t, len(re), len(data))
		h2, err := DecodeHandshake(re)
		require.NoError(t, err)
		require.Equal(t, h, h2)
	})
}

func FuzzReadMessage(f *testing.F) {
	addSeeds(f, seedMessages())
	const maxBytes = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, _, err := ReadMessage(bytes.NewReader(data), maxBytes, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrFrameTooLarge) &&
				!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		payload := msg.Payload
		compressed := msg.Header.CompressType() != protocol.None
		if compressed {
			// Only gzip is registered, and ReadMessage gave the payload back
			// unzipped: zip it again for the round trip.
			require.Equal(t, protocol.Gzip, msg.Header.CompressType())
			var zb bytes.Buffer
			zw := gzip.NewWriter(&zb)
			_, err := zw.Write(payload)
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			payload = zb.Bytes()
		}
		re := AppendMessage(nil, &msg.Header, msg.ServicePath, msg.ServiceMethod, msg.Metadata, payload)
		if !compressed {
			require.LessOrEqual(t, len(re), len(data))
		}
		msg2, _, err := ReadMessage(bytes.NewReader(re), math.MaxInt, nil)
		require.NoError(t, err)
		requireMessagesEqual(t, msg, msg2)

		// What we re-encode is a message rpcx reads the same way, and, with
		// at most one metadata key (map order), writes the same bytes for.
		m, err := protocol.Read(bytes.NewReader(re))
		require.NoError(t, err)
		require.Equal(t, msg.Header, *m.Header)
		require.Equal(t, msg.ServicePath, m.ServicePath)
		require.Equal(t, msg.ServiceMethod, m.ServiceMethod)
		require.Equal(t, len(msg.Metadata), len(m.Metadata))
		for k, v := range msg.Metadata {
			require.Equal(t, v, m.Metadata[k])
		}
		require.True(t, bytes.Equal(msg.Payload, m.Payload))
		if !compressed && len(msg.Metadata) <= 1 {
			require.Equal(t, rpcxEncode(msg.Header, msg.ServicePath, msg.ServiceMethod, msg.Metadata, msg.Payload), re)
		}
	})
}

func requireMessagesEqual(t *testing.T, want, got Message) {
	t.Helper()
	require.Equal(t, want.Header, got.Header)
	require.Equal(t, want.ServicePath, got.ServicePath)
	require.Equal(t, want.ServiceMethod, got.ServiceMethod)
	require.Equal(t, want.Metadata, got.Metadata)
	require.True(t, bytes.Equal(want.Payload, got.Payload), "payload %d vs %d bytes", len(want.Payload), len(got.Payload))
}

func FuzzDecodeCredit(f *testing.F) {
	f.Add(AppendCredit(nil, 1, 0))
	f.Add(AppendCredit(nil, 0xfeedface, 1<<40))
	f.Add([]byte{0x93})
	f.Fuzz(func(t *testing.T, data []byte) {
		inc, n, err := DecodeCredit(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		inc2, n2, err := DecodeCredit(AppendCredit(nil, inc, n))
		require.NoError(t, err)
		require.Equal(t, inc, inc2)
		require.Equal(t, n, n2)
	})
}

// FuzzDecodeCreditBytes runs the credit decoder of byte-window lanes, which
// reads both forms.
func FuzzDecodeCreditBytes(f *testing.F) {
	f.Add(AppendCredit(nil, 1, 0))
	f.Add(AppendCreditBytes(nil, 0xfeedface, 1<<40, 1<<20))
	f.Add([]byte{0x94})
	f.Fuzz(func(t *testing.T, data []byte) {
		inc, n, b, err := DecodeCreditBytes(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		inc2, n2, b2, err := DecodeCreditBytes(AppendCreditBytes(nil, inc, n, b))
		require.NoError(t, err)
		require.Equal(t, [3]uint64{inc, n, b}, [3]uint64{inc2, n2, b2})
	})
}
