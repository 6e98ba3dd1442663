// Package codec holds the wire formats of rpcxbatch: the batch frame a client
// lane writes, the reply frame a server connection writes back, the handshake,
// and the rpcx protocol message that carries each of them.
//
// Frames are msgpack, written and read by hand, without reflection:
// encoders append to a caller-owned buffer, and decoders check every
// declared length against the bytes really there before they allocate.
//
//	batch: [version, frameSeq, [entry, ...]]
//	entry: [kind, id, servicePath, serviceMethod, {metadata}, serializeType, payload, timeoutMicros(, compressType)]
//	reply frame: [version, incarnation, [reply, ...]]
//	reply: [id, status, errorText, {metadata}, payload(, compressType)]
//
// Every decoder refuses bytes that do not follow the format with
// ErrMalformed, a frame of another version with ErrVersion, and, given a
// cap, what passes it with ErrFrameTooLarge or ErrTooManyEntries
// (ReadMessage also returns its reader's errors, and Compress its
// compressor's).
//
// The format is a promise to the other releases a rolling upgrade meets:
// TestWireGolden checks that the messages recorded in testdata/wire still
// decode as recorded and are written byte for byte. docs/wire.md describes
// every message and how the format may change.
package codec
