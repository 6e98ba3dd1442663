package codec

import (
	"bytes"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
)

// OnewayHeader is the header rpcx itself builds for a oneway request with
// no serializer.
func TestOnewayHeaderIsRPCXs(t *testing.T) {
	m := protocol.NewMessage()
	m.SetMessageType(protocol.Request)
	m.SetOneway(true)
	m.SetSerializeType(protocol.SerializeNone)
	m.SetSeq(1234567)
	h := OnewayHeader(1234567)
	assert.Equal(t, *m.Header, h)
	assert.True(t, h.CheckMagicNumber())
	assert.True(t, h.IsOneway())
	assert.False(t, h.IsHeartbeat())
	assert.Equal(t, protocol.Request, h.MessageType())
	assert.Equal(t, uint64(1234567), h.Seq())
}

// rpcxMessageBytes is what rpcx writes for a message it builds itself,
// header field by header field, as its own client does.
func rpcxMessageBytes(set func(m *protocol.Message), path, method string, meta map[string]string, payload []byte) []byte {
	m := protocol.NewMessage()
	set(m)
	m.ServicePath, m.ServiceMethod, m.Metadata, m.Payload = path, method, meta, payload
	return bytes.Clone(m.Encode())
}

// The three messages a lane builds by hand are, byte for byte, what
// rpcx's Message.Encode writes for the same request: a batch frame
// (OnewayHeader, with the auth token; StartMessage and FinishMessage
// around the frame, as the writer builds it), the lane's heartbeat
// (HeartbeatHeader) and the handshake request (HandshakeHeader).
func TestLaneHeadersEncodeAsRPCX(t *testing.T) {
	payload := []byte{0x94, 0x01, 0x2a, 0x00, 0xc0}
	meta := map[string]string{share.AuthKey: "token"}

	h := OnewayHeader(42)
	frame, mark := StartMessage(nil, &h, ServicePath, MethodBatch, meta)
	frame = append(frame, payload...)
	FinishMessage(frame, mark)
	want := rpcxMessageBytes(func(m *protocol.Message) {
		m.SetMessageType(protocol.Request)
		m.SetOneway(true)
		m.SetSerializeType(protocol.SerializeNone)
		m.SetSeq(42)
	}, ServicePath, MethodBatch, meta, payload)
	assert.Equal(t, want, frame, "batch frame")

	h = HeartbeatHeader()
	want = rpcxMessageBytes(func(m *protocol.Message) {
		m.SetMessageType(protocol.Request)
		m.SetHeartbeat(true)
	}, "", "", nil, nil)
	assert.Equal(t, want, AppendMessage(nil, &h, "", "", nil, nil), "heartbeat")
	assert.True(t, h.IsHeartbeat())
	assert.False(t, h.IsOneway())

	h = HandshakeHeader()
	hsMeta := map[string]string{MetaMaxFrame: "1048576"}
	want = rpcxMessageBytes(func(m *protocol.Message) {
		m.SetMessageType(protocol.Request)
		m.SetSerializeType(protocol.SerializeNone)
	}, ServicePath, MethodHandshake, hsMeta, nil)
	assert.Equal(t, want, AppendMessage(nil, &h, ServicePath, MethodHandshake, hsMeta, nil), "handshake")
	assert.False(t, h.IsOneway())
	assert.False(t, h.IsHeartbeat())
}
