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

var readerPool = sync.Pool{New: func() any { return new(bytes.Reader) }}

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

// appendEncoder is a msgpack encoder bound to its appendWriter, pooled as
// a pair.
type appendEncoder struct {
	w   appendWriter
	enc *msgpack.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := new(appendEncoder)
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

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

// Encode encodes v with the codec of st into a new slice.
func Encode(st protocol.SerializeType, v any) ([]byte, error) {
	return Append(nil, st, v)
}

// Append encodes v with the codec of st, appending to dst, and returns
// the extended slice. With rpcx's msgpack codec the bytes are written
// straight into dst, so a caller that reuses dst encodes without
// allocating. Another codec's bytes are copied in, so that the result is
// always the caller's to reuse, except when dst is nil: then they are
// returned as the codec made them.
func Append(dst []byte, st protocol.SerializeType, v any) ([]byte, error) {
	c, fast := isRPCXMsgpack(st)
	if c == nil {
		return dst, ErrNoCodec
	}
	if !fast {
		b, err := c.Encode(v)
		if dst == nil {
			return b, err
		}
		return append(dst, b...), err
	}
	if m, ok := v.(msgp.Marshaler); ok {
		return m.MarshalMsg(dst)
	}
	e := encoderPool.Get().(*appendEncoder)
	e.w.b = dst
	err := e.enc.Encode(v)
	out := e.w.b
	e.w.b = nil
	encoderPool.Put(e)
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

// Codec is a goroutine's own encoder and decoder for rpcx's msgpack codec:
// a goroutine that encodes or decodes one payload after another (a lane's
// reader or writer, a server worker) keeps one and skips the pools that
// Append and Decode go through. Any other codec is used as Append and
// Decode use it. The zero value is ready; a Codec is not safe for
// concurrent use.
type Codec struct {
	enc *appendEncoder
	rd  bytes.Reader
	dec *msgpack.Decoder
}

// Append is Append with c's own encoder.
func (c *Codec) Append(dst []byte, st protocol.SerializeType, v any) ([]byte, error) {
	if _, fast := isRPCXMsgpack(st); !fast {
		return Append(dst, st, v)
	}
	if m, ok := v.(msgp.Marshaler); ok {
		return m.MarshalMsg(dst)
	}
	if c.enc == nil {
		c.enc = new(appendEncoder)
		c.enc.enc = msgpack.NewEncoder(&c.enc.w)
	}
	c.enc.w.b = dst
	err := c.enc.enc.Encode(v)
	out := c.enc.w.b
	c.enc.w.b = nil
	return out, err
}

// Decode is Decode with c's own decoder.
func (c *Codec) Decode(st protocol.SerializeType, data []byte, v any) error {
	if _, fast := isRPCXMsgpack(st); !fast {
		return Decode(st, data, v)
	}
	if m, ok := v.(msgp.Unmarshaler); ok {
		_, err := m.UnmarshalMsg(data)
		return err
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
