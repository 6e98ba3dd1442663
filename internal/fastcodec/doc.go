// Package fastcodec encodes and decodes rpcx payloads exactly as the codec
// registered in rpcx's share.Codecs does, but faster for rpcx's own msgpack
// codec: pointers to plain structs go through a plan compiled once per
// type from field offsets (checked against the library on probe values
// before first use; see structPlan), anything unusual is handed back to
// the library from the start, so results and errors are the library's, and
// every other type goes through the library with its encoders, decoders
// and buffers reused. Any other codec in share.Codecs runs as registered,
// except that nothing fastcodec returns aliases the caller's values or
// buffers, as with plain rpcx (Append copies such a codec's bytes, Decode
// hands it a copy of its input unless DecodeShared is used).
//
// It starts no goroutines. A Codec is used by one goroutine at a time.
package fastcodec
