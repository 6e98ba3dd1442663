// Package codec holds the wire formats of rpcxbatch: the batch frame a client
// lane writes, the reply frame a server connection writes back, the handshake,
// and the rpcx protocol message that carries each of them.
//
// Frames are msgpack (so any msgpack tool can read a captured frame) but they
// are written and read by hand, without reflection: encoders append to a
// caller-owned buffer that the caller reuses, and decoders check every
// declared length against the bytes that are really there before they
// allocate anything.
//
// A batch frame is the msgpack array
//
//	[version, frameSeq, [entry, ...]]
//
// and every entry is
//
//	[kind, id, servicePath, serviceMethod, {metadata}, serializeType, payload, timeoutMicros]
//
// A reply frame is
//
//	[version, incarnation, [reply, ...]]
//
// and every reply is
//
//	[id, status, errorText, {metadata}, payload]
//
// Version is bumped on any incompatible change; a decoder refuses a frame of
// another version with ErrVersion.
//
// The package starts no goroutines and holds no locks; its encoders write
// through internal/mpack, the module's one msgpack writer.
package codec
