package batchserver

import (
	"context"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// MaxDepth is the deepest nesting of arrays and maps a msgpack argument
// may have: the limit Go's encoding/json and protobuf keep for theirs.
const MaxDepth = fastcodec.MaxDepth

// ErrTooDeep is the error for a msgpack argument nested deeper than
// MaxDepth. The msgpack library decodes (and skips) nested values by
// recursion, with no limit: one argument of a few MiB nested millions
// deep overflows the decoding goroutine's stack, a fatal error that kills
// the whole process (no recover catches it), on plain rpcx as on any
// server that decodes it.
var ErrTooDeep = fastcodec.ErrTooDeep

// The batch path checks every msgpack entry's nesting before decoding it
// (internal/fastcodec): an entry nested too deep gets ErrTooDeep's text as
// its error reply, and the rest of its frame runs. Plain requests on the
// same server are decoded by rpcx itself, which has no such check: add
// DepthGuard to the server's plugins to give them one.

// DepthGuard is an rpcx server plugin that refuses, in its PostReadRequest
// hook, a request whose msgpack payload nests arrays and maps deeper than
// MaxDepth, before rpcx decodes it: add it with s.Plugins.Add(
// batchserver.DepthGuard{}) to protect plain rpcx requests, on a server
// with or without the batch plugin. It walks the payload without recursion,
// and only a payload longer than MaxDepth bytes (which one nested that
// deep must be); a request that is not msgpack passes. rpcx closes the
// connection of a request a read hook refuses (its client sees the
// connection end), as for any read hook error; a batched entry it refuses
// gets an error reply. It changes no process-wide setting.
type DepthGuard struct{}

// PostReadRequest is rpcx's PostReadRequestPlugin hook.
func (DepthGuard) PostReadRequest(_ context.Context, r *protocol.Message, e error) error {
	if e != nil || r == nil || r.IsHeartbeat() || r.SerializeType() != protocol.MsgPack {
		return nil
	}
	return fastcodec.CheckDepth(r.Payload)
}
