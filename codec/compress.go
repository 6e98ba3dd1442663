package codec

import (
	"bytes"
	"compress/gzip"
	"sync"

	"github.com/smallnest/rpcx/protocol"
)

// CompressThreshold is the payload size above which rpcx v1.9.4 compresses
// a message when compression is on: its client compresses a request whose
// encoded arguments are larger (client.send: len(data) > 1024), its server
// a response to a compressed request (Server.sendResponse). Lanes apply it
// to whole frames: a batch frame, or a reply frame, is compressed when its
// payload is larger.
const CompressThreshold = 1024

// MetaCompress, in a handshake request's metadata, is the rpcx
// protocol.CompressType (as a decimal number) the client's lanes compress
// their frames with; the server then compresses the reply frames it writes
// on that connection the same way. A server that does not know the key
// ignores it and writes its reply frames uncompressed, which the lane reads
// as well.
const MetaCompress = "rpcxbatch_compress"

// gzipper is a gzip writer with its output buffer, pooled: a gzip.Writer
// holds over 800 KiB of state, which rpcx pools too (util.Zip). Not
// util.Zip itself: in rpcx v1.9.4 it returns a slice of a buffer it has
// already put back in its pool, which a concurrent caller may overwrite.
type gzipper struct {
	buf bytes.Buffer
	w   *gzip.Writer
}

var gzippers = sync.Pool{New: func() any {
	g := new(gzipper)
	// rpcx's level: util.Zip uses gzip.NewWriter, DefaultCompression.
	g.w = gzip.NewWriter(&g.buf)
	return g
}}

// CompressMessage compresses the payload of the message m marks, which
// must be the last thing in b and finished (FinishMessage), with ct, as
// rpcx's protocol.Message.Encode does for a message whose header carries
// ct: the header's compress type is set and the lengths patched, so every
// rpcx reader (rpcx's own server decodes it before any handler sees the
// payload) and ReadMessage get the original payload back. It leaves the
// message as it is when ct is None or unknown, when the payload is no
// larger than CompressThreshold, or when compressing does not make it
// smaller (incompressible data then costs no extra bytes on the wire).
func CompressMessage(b []byte, m MessageMark, ct protocol.CompressType) []byte {
	payload := b[m.payloadLen+4:]
	if ct == protocol.None || len(payload) <= CompressThreshold {
		return b
	}
	var zipped []byte
	if ct == protocol.Gzip {
		g := gzippers.Get().(*gzipper)
		defer gzippers.Put(g)
		g.buf.Reset()
		g.w.Reset(&g.buf)
		if _, err := g.w.Write(payload); err != nil {
			return b
		}
		if err := g.w.Close(); err != nil {
			return b
		}
		zipped = g.buf.Bytes()
		if g.buf.Cap() > 4<<20 {
			// A rare huge frame's buffer is not worth keeping.
			defer func() { g.buf = bytes.Buffer{} }()
		}
	} else {
		c := protocol.Compressors[ct]
		if c == nil {
			return b
		}
		var err error
		if zipped, err = c.Zip(payload); err != nil {
			return b
		}
	}
	if len(zipped) >= len(payload) {
		return b
	}
	b = append(b[:m.payloadLen+4], zipped...)
	(*protocol.Header)(b[m.start : m.start+12]).SetCompressType(ct)
	FinishMessage(b, m)
	return b
}
