// Package fastcodec encodes and decodes rpcx payloads exactly as the codec
// registered in rpcx's share.Codecs does, but faster for rpcx's own msgpack
// codec:
//
//   - Pointers to plain structs (fields of the predeclared bool, string,
//     int, uint and float types and such structs nested by value, with
//     plain msgpack tags) are encoded and decoded by a plan compiled once
//     per type from field offsets: the bytes the library writes, without
//     its reflection and its per-struct cache lookups on every value. A
//     plan is checked against the library on probe values before first use
//     (see structPlan for what that check can and cannot see). Decoding
//     skips fields the type does not have, as the library does, and hands
//     anything else unusual (unexpected codes, damaged input) back to the
//     library from the start, so results and errors are the library's.
//   - Every other type goes through the library itself, with encoders,
//     decoders and buffers reused instead of allocated per call.
//
// Any other codec registered in share.Codecs runs as registered, except
// that nothing fastcodec returns aliases the caller's values or buffers,
// as nothing does with plain rpcx (which gives every message a buffer of
// its own): Append copies such a codec's bytes (rpcx's ByteCodec returns
// a []byte argument itself), and Decode hands it a copy of its input
// (ByteCodec keeps it in the value), unless the caller hands the bytes
// over with DecodeShared.
//
// It starts no goroutines. Compiled plans are kept in a sync.Map by type;
// Codecs are pooled, and a Codec is used by one goroutine at a time.
package fastcodec
