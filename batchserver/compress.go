package batchserver

import (
	"strconv"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Compression on lanes follows rpcx's rule for a plain request, per entry
// (codec's compress.go): a lane that names its compress type in its
// handshake (codec.MetaEntryCompress) is told the server reads compressed
// entries, and then compresses each entry's payload above rpcx's
// threshold; the plugin inflates each one itself, through the frame's byte
// cap (codec.InflateEntries), the server's hooks see the entry's compress
// flag as rpcx's see a request's, and the reply is compressed above the
// same threshold (codec.AppendReply). Frames are never flagged compressed,
// so rpcx itself inflates nothing of a lane, unbounded (rpcx v1.9.4 has no
// bound) or under a bound meant for a single request.
//
// A lane older than that asks only for whole frames (codec.MetaCompress):
// rpcx inflates its batch frames, and its reply frames are compressed whole.

// compressReplies compresses the reply frame m marks at the end of b when
// the connection's lane asked for compression.
func (c *conn) compressReplies(b []byte, m codec.MessageMark) []byte {
	return codec.CompressMessage(b, m, protocol.CompressType(c.compress.Load()))
}

// laneWants notes what a lane's handshake asks of the connection: entry
// compression (answered in the response's metadata) or, from an older
// lane, reply-frame compression, and whether it reads a reply too large
// for a frame alone (codec.MetaLargeReplies).
func (c *conn) laneWants(ctx *server.Context) {
	meta := ctx.Metadata()
	if ct := codec.EntryCompressOf(meta); ct != protocol.None {
		if res, ok := ctx.Get(share.ResMetaDataKey).(map[string]string); ok {
			res[codec.MetaEntryCompress] = strconv.Itoa(int(ct))
			c.compress.Store(uint32(protocol.None))
		}
	} else {
		// None when the lane asks for none, or for a type rpcx has no
		// compressor for: the client then reads uncompressed reply
		// frames, as from an older server.
		c.compress.Store(uint32(codec.FrameCompressOf(meta)))
	}
	c.largeReplies.Store(meta[codec.MetaLargeReplies] == "1")
}
