// Package fastcodec encodes and decodes rpcx payloads exactly as the codec
// registered in rpcx's share.Codecs does, but for rpcx's own msgpack codec
// it reuses pooled encoders, decoders and buffers instead of allocating
// them per call. The bytes are the same: the same library with the same
// settings writes them.
package fastcodec

import (
	"bytes"
	"errors"
	"sync"

	"github.com/smallnest/rpcx/codec"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/tinylib/msgp/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrNoCodec is returned for a serialize type with no registered codec.
var ErrNoCodec = errors.New("rpcxbatch: no rpcx codec is registered for this serialize type")

// maxPooledBuffer is the largest encode scratch buffer kept for reuse.
const maxPooledBuffer = 1 << 10

var (
	bufPool    = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	readerPool = sync.Pool{New: func() any { return new(bytes.Reader) }}
)

// isRPCXMsgpack reports whether st is served by rpcx's own msgpack codec
// (a user may have registered another one under the same type).
func isRPCXMsgpack(st protocol.SerializeType) (codec.Codec, bool) {
	c := share.Codecs[st]
	switch c.(type) {
	case codec.MsgpackCodec, *codec.MsgpackCodec:
		return c, true
	}
	return c, false
}

// Encode encodes v with the codec of st.
func Encode(st protocol.SerializeType, v any) ([]byte, error) {
	c, fast := isRPCXMsgpack(st)
	if c == nil {
		return nil, ErrNoCodec
	}
	if !fast {
		return c.Encode(v)
	}
	if m, ok := v.(msgp.Marshaler); ok {
		return m.MarshalMsg(nil)
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	err := enc.Encode(v)
	msgpack.PutEncoder(enc)
	out := bytes.Clone(buf.Bytes())
	// Only small scratch buffers go back: under overload every caller
	// encoding at once leaves one in the pool, and large ones would make
	// the pool hold payload-sized memory per caller.
	if buf.Cap() <= maxPooledBuffer {
		bufPool.Put(buf)
	}
	return out, err
}

// Decode decodes data into v with the codec of st.
func Decode(st protocol.SerializeType, data []byte, v any) error {
	c, fast := isRPCXMsgpack(st)
	if c == nil {
		return ErrNoCodec
	}
	if !fast {
		return c.Decode(data, v)
	}
	if m, ok := v.(msgp.Unmarshaler); ok {
		_, err := m.UnmarshalMsg(data)
		return err
	}
	rd := readerPool.Get().(*bytes.Reader)
	rd.Reset(data)
	dec := msgpack.GetDecoder()
	dec.Reset(rd)
	err := dec.Decode(v)
	dec.Reset(nil)
	msgpack.PutDecoder(dec)
	rd.Reset(nil)
	readerPool.Put(rd)
	return err
}
