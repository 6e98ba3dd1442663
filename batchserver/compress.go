package batchserver

import (
	"strconv"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Compression on lanes follows rpcx's rule for a plain request: a response
// is compressed the way its request was (Server.sendResponse). A lane asks
// for it once, in its handshake (codec.MetaCompress), and its batch frames
// then arrive compressed whenever they are larger than rpcx's threshold;
// rpcx decompresses each before the plugin reads it. The reply frames
// written on that connection are compressed the same way, above the same
// threshold (codec.CompressMessage).

// compressWanted returns the compress type a handshake's metadata asks
// for: None when it asks for none, or for one rpcx has no compressor for
// (the client then reads uncompressed reply frames, as from an older
// server).
func compressWanted(meta map[string]string) protocol.CompressType {
	v, err := strconv.Atoi(meta[codec.MetaCompress])
	if err != nil || v <= 0 || v > 0xff {
		return protocol.None
	}
	ct := protocol.CompressType(v)
	if protocol.Compressors[ct] == nil {
		return protocol.None
	}
	return ct
}

// compressReplies compresses the reply frame m marks at the end of b when
// the connection's lane asked for compression.
func (c *conn) compressReplies(b []byte, m codec.MessageMark) []byte {
	return codec.CompressMessage(b, m, protocol.CompressType(c.compress.Load()))
}

// laneWants notes what a lane's handshake asks of the connection: reply
// compression, and whether it reads a reply too large for a frame alone
// (codec.MetaLargeReplies).
func (c *conn) laneWants(ctx *server.Context) {
	meta := ctx.Metadata()
	c.compress.Store(uint32(compressWanted(meta)))
	c.largeReplies.Store(meta[codec.MetaLargeReplies] == "1")
}
