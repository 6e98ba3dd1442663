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
// with a ninth field, compressType, when the payload is compressed (sent
// only to a server that said it reads it, MetaEntryCompress).
//
// A reply frame is
//
//	[version, incarnation, [reply, ...]]
//
// and every reply is
//
//	[id, status, errorText, {metadata}, payload]
//
// with a sixth field, compressType, when the payload is compressed (sent
// only to a lane that said it reads it).
//
// Version is bumped on any incompatible change; a decoder refuses a frame of
// another version with ErrVersion. Every decoder refuses bytes that do not
// follow the format with ErrMalformed, and one given a cap refuses what
// passes it with ErrFrameTooLarge or ErrTooManyEntries. (ReadMessage also
// returns its reader's errors, and Compress its compressor's.)
//
// # Compatibility
//
// Clients and servers of different releases meet during every rolling
// upgrade, so the wire format is a promise. testdata/wire records the
// messages of Version 1 (handshake request and response, batch, reply,
// both credit forms, drain notice, both heartbeats), and TestWireGolden
// checks that they still decode as recorded and that today's encoders
// write them byte for byte. A change must keep that test passing
// unchanged: never move, drop, retype or reinterpret a recorded field,
// and never make a recorded message invalid. New behaviour is added the
// way byte credits and compression were: the client announces it with a
// new key in the handshake request's metadata, the server answers with a
// new key in the response's metadata, and a new form of a message (the
// four-field credit) goes only to a lane that announced it; a new
// server-pushed method (MethodDrain) is one older lanes ignore; a new
// call a lane makes of the server (MethodFence) is one an older server
// answers with an error, which the lane takes as "not here". Only a
// change that cannot be made so bumps Version, and then old and new
// releases no longer share lanes: record the new version's messages
// beside the old ones.
//
// The package starts no goroutines and holds no locks; its encoders write
// through internal/mpack, the module's one msgpack writer.
package codec
