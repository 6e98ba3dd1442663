package codec

import "github.com/smallnest/rpcx/protocol"

// OnewayHeader returns the rpcx header of the messages that carry frames
// (batch, reply, credit, drain notice) and of the server's heartbeats: a
// request, so that rpcx's reader and cmux take it as any client's; oneway,
// as nothing answers it with an rpcx response; no serializer, as its
// payload is a frame; and seq.
func OnewayHeader(seq uint64) protocol.Header {
	h := requestHeader()
	h.SetOneway(true)
	h.SetSerializeType(protocol.SerializeNone)
	h.SetSeq(seq)
	return h
}

// HeartbeatHeader returns the rpcx header of a lane's heartbeat: a
// request with rpcx's heartbeat flag, which rpcx's server answers with a
// heartbeat response of its own (server.go, handleRequest), and which the
// batch plugin never sees. No serializer and seq 0: it has no payload,
// and no reply is matched to it.
func HeartbeatHeader() protocol.Header {
	h := requestHeader()
	h.SetHeartbeat(true)
	return h
}

// HandshakeHeader returns the rpcx header of a lane's handshake request
// (MethodHandshake): an ordinary two-way request with no serializer (its
// parameters travel in the metadata), so that rpcx's server answers it,
// and a plain rpcx server answers it with "can't find service".
func HandshakeHeader() protocol.Header {
	h := requestHeader()
	h.SetSerializeType(protocol.SerializeNone)
	return h
}

// requestHeader returns the header every message of the lanes starts
// from: rpcx's magic number and a request.
func requestHeader() protocol.Header {
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	return h
}
