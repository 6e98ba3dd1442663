package codec

import "github.com/smallnest/rpcx/protocol"

// OnewayHeader returns the rpcx header of the messages that carry frames
// (batch, reply, credit, drain notice) and of the server's heartbeats: a
// request, so that rpcx's reader and cmux take it as any client's; oneway,
// as nothing answers it with an rpcx response; no serializer, as its
// payload is a frame; and seq.
func OnewayHeader(seq uint64) protocol.Header {
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetOneway(true)
	h.SetSerializeType(protocol.SerializeNone)
	h.SetSeq(seq)
	return h
}
