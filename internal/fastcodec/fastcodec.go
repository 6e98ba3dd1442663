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
var ErrNoCodec = errors.New("fastcodec: no codec registered for the serialize type")

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

// DecodeShared decodes data into v with the codec of st; v may keep data
// (see Codec.DecodeShared).
func DecodeShared(st protocol.SerializeType, data []byte, v any) error {
	c := codecPool.Get().(*Codec)
	err := c.DecodeShared(st, data, v)
	codecPool.Put(c)
	return err
}

// MayAlias reports whether a value the codec of st decodes may keep the
// bytes it was decoded from when they are handed over with DecodeShared:
// true for every registered codec but rpcx's msgpack.
func MayAlias(st protocol.SerializeType) bool {
	rc, fast := isRPCXMsgpack(st)
	return rc != nil && !fast
}

// Encode encodes v with the codec of st into a new slice, which never
// aliases v (see Codec.Append).
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

// AppendResolved is Append with the codec r resolved already.
func AppendResolved(dst []byte, r Resolved, v any) ([]byte, error) {
	c := codecPool.Get().(*Codec)
	out, err := c.AppendResolved(dst, r, v)
	codecPool.Put(c)
	return out, err
}

// Decode decodes data into v with the codec of st; v never aliases data
// (see Codec.Decode).
func Decode(st protocol.SerializeType, data []byte, v any) error {
	c := codecPool.Get().(*Codec)
	err := c.Decode(st, data, v)
	codecPool.Put(c)
	return err
}

// Resolved is the codec registered for a serialize type, looked up once
// (Resolve) by a caller that encodes or decodes with it more than once in
// a row: a server entry decodes its argument and encodes its reply, a
// lane's writer encodes a frame's arguments. Each lookup is a map access
// (share.Codecs), which showed in the server's profile at three an entry.
type Resolved struct {
	rc   codec.Codec
	fast bool
	// pack says the payload is msgpack (protocol.MsgPack, whatever codec
	// is registered for it): its depth is checked (CheckDepth).
	pack bool
}

// Resolve looks up the codec of st, as Append and Decode do.
func Resolve(st protocol.SerializeType) Resolved {
	rc, fast := isRPCXMsgpack(st)
	return Resolved{rc: rc, fast: fast, pack: st == protocol.MsgPack}
}

// Missing reports whether st had no codec registered.
func (r Resolved) Missing() bool { return r.rc == nil }

// Append encodes v with the codec of st, appending to dst, and returns the
// extended slice. With rpcx's msgpack codec the bytes are written straight
// into dst, so a caller that reuses dst encodes without allocating.
// Another codec's bytes are copied in, into a new slice when dst is nil:
// such a codec may return bytes of v itself (rpcx's ByteCodec returns a
// []byte argument as it is), and the result is the caller's to keep,
// reuse and write to, while v stays its owner's.
func (c *Codec) Append(dst []byte, st protocol.SerializeType, v any) ([]byte, error) {
	return c.AppendResolved(dst, Resolve(st), v)
}

// AppendResolved is Append with the codec r resolved already.
func (c *Codec) AppendResolved(dst []byte, r Resolved, v any) ([]byte, error) {
	rc, fast := r.rc, r.fast
	if rc == nil {
		return dst, ErrNoCodec
	}
	if !fast {
		b, err := rc.Encode(v)
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

// Decode decodes data into v with the codec of st. v never aliases data,
// so the caller may reuse data once Decode returns: rpcx's msgpack codec
// copies what it keeps, and any other codec is handed a copy of data,
// since it may keep data's bytes in v (rpcx's ByteCodec sets a []byte
// reply to data itself; plain rpcx gives it a fresh buffer per message).
func (c *Codec) Decode(st protocol.SerializeType, data []byte, v any) error {
	return c.decode(Resolve(st), data, v, true)
}

// DecodeShared is Decode for data that is never written to or reused
// (the server's batch frames): any codec but rpcx's msgpack gets data
// itself, as rpcx hands it a request's own buffer, and v may keep it.
func (c *Codec) DecodeShared(st protocol.SerializeType, data []byte, v any) error {
	return c.decode(Resolve(st), data, v, false)
}

// DecodeSharedResolved is DecodeShared with the codec r resolved already.
func (c *Codec) DecodeSharedResolved(r Resolved, data []byte, v any) error {
	return c.decode(r, data, v, false)
}

// DecodeResolved is Decode with the codec r resolved already.
func (c *Codec) DecodeResolved(r Resolved, data []byte, v any) error {
	return c.decode(r, data, v, true)
}

// decode decodes data into v with the codec r; a codec other than rpcx's
// msgpack gets a copy of data if clone is set.
func (c *Codec) decode(r Resolved, data []byte, v any, clone bool) error {
	rc, fast := r.rc, r.fast
	if rc == nil {
		return ErrNoCodec
	}
	if r.pack && len(data) > MaxDepth {
		// Before any decoder, all of which recurse (depth.go).
		if err := CheckDepth(data); err != nil {
			return err
		}
	}
	if !fast {
		if clone {
			data = bytes.Clone(data)
		}
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
