// Package codec holds the wire formats of rpcxbatch: the batch frame a client
// lane writes, the reply frame a server connection writes back, the handshake,
// and the rpcx protocol message that carries each of them.
//
// Frames are msgpack (so any msgpack tool can read a captured frame) but they
// are written and read by hand, without reflection: encoders append to a
// caller-owned buffer that the caller reuses, and decoders check every
// declared length against the bytes that are really there before they
// allocate anything. A batch frame is
//
//	[version, frameSeq, [entry, ...]]
//	entry: [kind, id, servicePath, serviceMethod, {metadata}, serializeType, payload, timeoutMicros(, compressType)]
//
// and a reply frame
//
//	[version, incarnation, [reply, ...]]
//	reply: [id, status, errorText, {metadata}, payload(, compressType)]
//
// The wire format is a promise to the other releases a rolling upgrade
// meets: TestWireGolden checks that the messages of Version 1 recorded in
// testdata/wire still decode as recorded and are written byte for byte.
// docs/wire.md describes every message and how the format may change
// (announced in the handshake; Version bumped, and a decoder refusing the
// old with ErrVersion, only when it cannot be).
package codec
