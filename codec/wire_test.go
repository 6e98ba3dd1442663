package codec

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testMaxBytes = 64 << 20

// sampleHeader returns an rpcx request header with every field set to
// something other than its zero value.
func sampleHeader(seq uint64) protocol.Header {
	m := protocol.NewMessage()
	m.SetVersion(3)
	m.SetMessageType(protocol.Request)
	m.SetOneway(true)
	m.SetMessageStatusType(protocol.Normal)
	m.SetSerializeType(protocol.MsgPack)
	m.SetSeq(seq)
	return *m.Header
}

// rpcxEncode is what rpcx itself writes for the same message.
func rpcxEncode(h protocol.Header, path, method string, meta map[string]string, payload []byte) []byte {
	m := protocol.NewMessage()
	*m.Header = h
	m.ServicePath, m.ServiceMethod, m.Metadata, m.Payload = path, method, meta, payload
	return bytes.Clone(m.Encode())
}

func readOne(t *testing.T, b []byte) Message {
	t.Helper()
	msg, _, err := ReadMessage(bytes.NewReader(b), testMaxBytes, nil)
	require.NoError(t, err)
	return msg
}

type wireCase struct {
	name          string
	h             protocol.Header
	path, method  string
	meta          map[string]string
	payload       []byte
	onlyRoundTrip bool // more than one metadata key: rpcx's map order differs
}

func wireCases() []wireCase {
	var cs []wireCase
	for _, n := range strLens {
		cs = append(cs, wireCase{
			name: fmt.Sprintf("strings-%d", n), h: sampleHeader(1),
			path: str("Path", n), method: str("Method", n),
			meta: map[string]string{str("key", n): str("value", n)}, payload: []byte("p"),
		})
	}
	for _, n := range payloadLens {
		cs = append(cs, wireCase{name: fmt.Sprintf("payload-%d", n), h: sampleHeader(2), path: "Arith", method: "Mul", payload: pattern(n)})
	}
	for _, seq := range uintValues {
		cs = append(cs, wireCase{name: fmt.Sprintf("seq-%d", seq), h: sampleHeader(seq), path: "A", method: "B", payload: []byte{1}})
	}
	hb := sampleHeader(9)
	hb.SetHeartbeat(true)
	hb.SetOneway(false)
	hb.SetMessageType(protocol.Response)
	hb.SetMessageStatusType(protocol.Error)
	hb.SetSerializeType(protocol.JSON)
	cs = append(cs,
		wireCase{name: "all-empty", h: sampleHeader(0)},
		wireCase{name: "empty-meta-map", h: sampleHeader(3), path: "p", method: "m", meta: map[string]string{}},
		wireCase{name: "empty-meta-kv", h: sampleHeader(3), path: "p", method: "m", meta: map[string]string{"": ""}},
		wireCase{name: "header-bits", h: hb, path: "p", method: "m", meta: map[string]string{protocol.ServiceError: "boom"}, payload: []byte("x")},
		wireCase{name: "many-meta", h: sampleHeader(4), path: "p", method: "m", onlyRoundTrip: true,
			meta: map[string]string{"a": "1", "bb": "22", "ccc": "", "": "empty key"}, payload: []byte("x")},
	)
	return cs
}

func TestMessageRoundTrip(t *testing.T) {
	for _, c := range wireCases() {
		t.Run(c.name, func(t *testing.T) {
			b := AppendMessage(nil, &c.h, c.path, c.method, c.meta, c.payload)
			msg := readOne(t, b)
			assert.Equal(t, c.h, msg.Header)
			assert.Equal(t, c.path, msg.ServicePath)
			assert.Equal(t, c.method, msg.ServiceMethod)
			requireMetaEqual(t, c.meta, msg.Metadata)
			require.True(t, bytes.Equal(c.payload, msg.Payload), "payload %d vs %d bytes", len(c.payload), len(msg.Payload))

			// StartMessage, an in-place payload in two pieces, FinishMessage:
			// the same bytes as AppendMessage, also after a prefix.
			if len(c.meta) <= 1 {
				prefix := []byte("earlier message bytes")
				s, mark := StartMessage(bytes.Clone(prefix), &c.h, c.path, c.method, c.meta)
				half := len(c.payload) / 2
				s = append(s, c.payload[:half]...)
				s = append(s, c.payload[half:]...)
				FinishMessage(s, mark)
				require.Equal(t, prefix, s[:len(prefix)])
				require.True(t, bytes.Equal(b, s[len(prefix):]), "StartMessage+FinishMessage differs from AppendMessage")
			}
		})
	}
}

// Our encoding is byte for byte rpcx's, and each side reads the other's.
func TestMessageMatchesRPCX(t *testing.T) {
	for _, c := range wireCases() {
		t.Run(c.name, func(t *testing.T) {
			ours := AppendMessage(nil, &c.h, c.path, c.method, c.meta, c.payload)
			theirs := rpcxEncode(c.h, c.path, c.method, c.meta, c.payload)
			if !c.onlyRoundTrip {
				require.True(t, bytes.Equal(ours, theirs), "AppendMessage differs from protocol.Message.Encode (%d vs %d bytes)", len(ours), len(theirs))
			}

			// rpcx reads ours.
			m, err := protocol.Read(bytes.NewReader(ours))
			require.NoError(t, err)
			assert.Equal(t, c.h, *m.Header)
			assert.Equal(t, c.path, m.ServicePath)
			assert.Equal(t, c.method, m.ServiceMethod)
			requireMetaEqual(t, c.meta, m.Metadata)
			require.True(t, bytes.Equal(c.payload, m.Payload))

			// We read rpcx's.
			msg := readOne(t, theirs)
			assert.Equal(t, c.h, msg.Header)
			assert.Equal(t, c.path, msg.ServicePath)
			assert.Equal(t, c.method, msg.ServiceMethod)
			requireMetaEqual(t, c.meta, msg.Metadata)
			require.True(t, bytes.Equal(c.payload, msg.Payload))
		})
	}
}

// rpcx compresses the payload when the header says gzip; ReadMessage
// decompresses it.
func TestReadMessageGzip(t *testing.T) {
	h := sampleHeader(5)
	h.SetCompressType(protocol.Gzip)
	payload := bytes.Repeat([]byte("compress me "), 1000)
	theirs := rpcxEncode(h, "p", "m", map[string]string{"k": "v"}, payload)
	require.Less(t, len(theirs), len(payload), "rpcx compressed the payload")
	msg := readOne(t, theirs)
	assert.Equal(t, protocol.Gzip, msg.Header.CompressType())
	assert.Equal(t, payload, msg.Payload)

	// AppendMessage writes the payload as given, so a caller that sets gzip
	// passes an already compressed payload; rpcx reads it back.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err := zw.Write(payload)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	ours := AppendMessage(nil, &h, "p", "m", nil, zb.Bytes())
	m, err := protocol.Read(bytes.NewReader(ours))
	require.NoError(t, err)
	assert.Equal(t, payload, m.Payload)
	assert.Equal(t, payload, readOne(t, ours).Payload)
}

// Several messages back to back on one stream read one at a time, reusing
// the buffer; a clean end of stream is io.EOF.
func TestReadMessageStream(t *testing.T) {
	var stream []byte
	var want []wireCase
	for i, c := range wireCases() {
		if len(c.payload) > 1<<16 || i%2 == 1 {
			continue
		}
		want = append(want, c)
		stream = AppendMessage(stream, &c.h, c.path, c.method, c.meta, c.payload)
	}
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, 1<<10)
	for _, c := range want {
		var msg Message
		var err error
		msg, buf, err = ReadMessage(r, testMaxBytes, buf)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.h, msg.Header, c.name)
		assert.Equal(t, c.path, msg.ServicePath, c.name)
		requireMetaEqual(t, c.meta, msg.Metadata)
		require.True(t, bytes.Equal(c.payload, msg.Payload), c.name)
		// The payload aliases the returned buffer.
		require.True(t, aliases(buf[:cap(buf)], msg.Payload), c.name)
	}
	_, _, err := ReadMessage(r, testMaxBytes, buf)
	require.ErrorIs(t, err, io.EOF)
}

func TestReadMessageBufferReuse(t *testing.T) {
	h := sampleHeader(1)
	b := AppendMessage(nil, &h, "p", "m", nil, pattern(100))
	big := make([]byte, 0, 4096)
	_, got, err := ReadMessage(bytes.NewReader(b), testMaxBytes, big)
	require.NoError(t, err)
	assert.Same(t, &big[:1][0], &got[:1][0], "a big enough buffer is reused")

	small := make([]byte, 0, 8)
	_, got, err = ReadMessage(bytes.NewReader(b), testMaxBytes, small)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cap(got), len(b)-headerLen, "a small buffer is replaced")
}

func TestReadMessageCapBoundary(t *testing.T) {
	h := sampleHeader(1)
	b := AppendMessage(nil, &h, "p", "m", nil, pattern(1000))
	total := len(b) - headerLen
	_, _, err := ReadMessage(bytes.NewReader(b), total, nil)
	require.NoError(t, err, "a message of exactly maxBytes is accepted")
	_, _, err = ReadMessage(bytes.NewReader(b), total-1, nil)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	_, _, err = ReadMessage(bytes.NewReader(b), 0, nil)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	_, _, err = ReadMessage(bytes.NewReader(b), math.MaxInt, nil)
	require.NoError(t, err)
}
