package fastcodec

import (
	"bytes"
	"errors"
	"reflect"
	"sync"

	"github.com/smallnest/rpcx/codec"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/tinylib/msgp/msgp"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrNoCodec is returned for a serialize type with no registered codec.
var ErrNoCodec = errors.New("rpcxbatch: no rpcx codec is registered for this serialize type")

// appendWriter is the io.Writer an encoder writes through: it appends to
// a slice the caller supplies. It has WriteByte and WriteString so that
// msgpack writes to it directly rather than through a buffered wrapper.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func (w *appendWriter) WriteByte(c byte) error { w.b = append(w.b, c); return nil }

func (w *appendWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

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

// Codec is an encoder and a decoder for rpcx's msgpack codec that a
// goroutine encoding or decoding one payload after another (a lane's reader
// or writer, a server worker) keeps for itself; Append and Decode take one
// from a pool. Any other codec is used as registered. The zero value is
// ready; a Codec is not safe for concurrent use.
type Codec struct {
	w   appendWriter
	enc *msgpack.Encoder
	rd  bytes.Reader
	dec *msgpack.Decoder
}

var codecPool = sync.Pool{New: func() any { return new(Codec) }}

// Encode encodes v with the codec of st into a new slice.
func Encode(st protocol.SerializeType, v any) ([]byte, error) {
	return Append(nil, st, v)
}

// Append encodes v with the codec of st, appending to dst, and returns
// the extended slice (see Codec.Append).
func Append(dst []byte, st protocol.SerializeType, v any) ([]byte, error) {
	c := codecPool.Get().(*Codec)
	out, err := c.Append(dst, st, v)
	codecPool.Put(c)
	return out, err
}

// Decode decodes data into v with the codec of st.
func Decode(st protocol.SerializeType, data []byte, v any) error {
	c := codecPool.Get().(*Codec)
	err := c.Decode(st, data, v)
	codecPool.Put(c)
	return err
}

// Append encodes v with the codec of st, appending to dst, and returns the
// extended slice. With rpcx's msgpack codec the bytes are written straight
// into dst, so a caller that reuses dst encodes without allocating.
// Another codec's bytes are copied in, so that the result is always the
// caller's to reuse, except when dst is nil: then they are returned as
// the codec made them.
func (c *Codec) Append(dst []byte, st protocol.SerializeType, v any) ([]byte, error) {
	rc, fast := isRPCXMsgpack(st)
	if rc == nil {
		return dst, ErrNoCodec
	}
	if !fast {
		b, err := rc.Encode(v)
		if dst == nil {
			return b, err
		}
		return append(dst, b...), err
	}
	if m, ok := v.(msgp.Marshaler); ok {
		return m.MarshalMsg(dst)
	}
	if p := planFor(reflect.TypeOf(v)); p != nil {
		base := reflect.ValueOf(v).UnsafePointer()
		if base == nil {
			return append(dst, 0xc0), nil
		}
		return p.encode(dst, base), nil
	}
	if c.enc == nil {
		c.enc = msgpack.NewEncoder(&c.w)
	}
	c.w.b = dst
	err := c.enc.Encode(v)
	out := c.w.b
	c.w.b = nil
	return out, err
}

// Decode decodes data into v with the codec of st.
func (c *Codec) Decode(st protocol.SerializeType, data []byte, v any) error {
	rc, fast := isRPCXMsgpack(st)
	if rc == nil {
		return ErrNoCodec
	}
	if !fast {
		return rc.Decode(data, v)
	}
	if m, ok := v.(msgp.Unmarshaler); ok {
		_, err := m.UnmarshalMsg(data)
		return err
	}
	if p := planFor(reflect.TypeOf(v)); p != nil {
		if base := reflect.ValueOf(v).UnsafePointer(); base != nil && p.decode(data, base) {
			return nil
		}
	}
	c.rd.Reset(data)
	if c.dec == nil {
		c.dec = msgpack.NewDecoder(&c.rd)
	} else {
		c.dec.Reset(&c.rd)
	}
	err := c.dec.Decode(v)
	c.rd.Reset(nil)
	return err
}
