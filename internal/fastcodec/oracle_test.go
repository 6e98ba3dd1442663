package fastcodec

import (
	"github.com/smallnest/rpcx/codec"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
)

// rpcxCodec is the oracle every differential test compares with: the codec
// rpcx itself registers for msgpack, with its settings.
func rpcxCodec() codec.Codec { return share.Codecs[protocol.MsgPack] }
