package group

import (
	"context"
	"fmt"
	"maps"
	"reflect"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// serializeTyper is a Caller that tells which rpcx codec it encodes
// arguments with (*batchclient.Client and *PlainCaller do).
type serializeTyper interface {
	SerializeType() protocol.SerializeType
}

// serializeTypeOf is the codec caller encodes with: its own word for it,
// or rpcx's default, msgpack.
func serializeTypeOf(caller Caller) protocol.SerializeType {
	if st, ok := caller.(serializeTyper); ok {
		return st.SerializeType()
	}
	return protocol.MsgPack
}

// argsCopy is a group call's own copy of the caller's arguments, made on
// the caller's goroutine before anything is handed to a node: the encoded
// bytes, and a value of the arguments' type decoded from them. Transports
// may read shared (encode it, on goroutines of their own, after the
// operation has returned) but nobody writes it; a local node that runs
// after the operation returned gets a fresh decode of its own, since a
// handler may change its arguments.
type argsCopy struct {
	st     protocol.SerializeType
	typ    reflect.Type
	b      []byte
	shared any
}

// take makes a the copy of args with the codec of st: it encodes args and
// decodes the bytes back into a new value of args's type. nil stays nil.
// The error wraps ErrEncode and the codec's error.
func (a *argsCopy) take(st protocol.SerializeType, args any) error {
	*a = argsCopy{st: st}
	if args == nil {
		return nil
	}
	if share.Codecs[st] == nil {
		return fmt.Errorf("%w: no rpcx codec is registered for serialize type %d", ErrEncode, st)
	}
	a.typ = reflect.TypeOf(args)
	var err error
	if a.b, err = encodeGuarded(args, st, sizeHint(st, a.typ)); err != nil {
		return fmt.Errorf("%w: %T: %w", ErrEncode, args, err)
	}
	noteSize(st, a.typ, len(a.b))
	if a.shared, err = a.decode(); err != nil {
		return err
	}
	return nil
}

// fresh returns a new copy, for one consumer that may change it.
func (a *argsCopy) fresh() (any, error) {
	if a.typ == nil {
		return nil, nil
	}
	return a.decode()
}

// decode decodes a.b into a new value of a.typ: a pointer type gets a new
// pointee, any other type a new value.
func (a *argsCopy) decode() (any, error) {
	ptr := a.typ.Kind() == reflect.Pointer
	var target reflect.Value
	if ptr {
		target = reflect.New(a.typ.Elem())
	} else {
		target = reflect.New(a.typ)
	}
	if err := decodeGuarded(a.b, a.st, target.Interface()); err != nil {
		return nil, fmt.Errorf("%w: %v: decoding the arguments' own encoding back (to copy them) failed: %w", ErrEncode, a.typ, err)
	}
	if ptr {
		return target.Interface(), nil
	}
	return target.Elem().Interface(), nil
}

// transcode copies from into to (a pointer) through the codec of st, as
// the wire would carry a value of one type to a handler that takes
// another.
func transcode(st protocol.SerializeType, from, to any) error {
	b, err := encodeGuarded(from, st, 0)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := decodeGuarded(b, st, to); err != nil {
		return fmt.Errorf("decoding into %T: %w", to, err)
	}
	return nil
}

// encodeGuarded encodes args with the codec of st, as batchclient does
// (internal/fastcodec: rpcx's codecs, msgpack's without its reflection
// where it can), into a buffer of capacity size when size > 0, turning a
// panic into an error.
func encodeGuarded(args any, st protocol.SerializeType, size int) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("group: encoding panicked: %v", r)
		}
	}()
	var dst []byte
	if size > 0 {
		dst = make([]byte, 0, size)
	}
	return fastcodec.Append(dst, st, args)
}

// decodeGuarded decodes b into v with the codec of st, turning a panic
// into an error.
func decodeGuarded(b []byte, st protocol.SerializeType, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("group: decoding panicked: %v", r)
		}
	}()
	return fastcodec.Decode(st, b, v)
}

// ownContext returns ctx with a copy of its rpcx request metadata (the map
// at share.ReqMetaDataKey), which casts and fan-outs read when they send,
// possibly after the operation returned: the caller may change its map as
// soon as the operation returns, as with its arguments.
func (s *spec) ownContext(ctx context.Context) context.Context {
	m, ok := ctx.Value(reqMetaKey).(map[string]string)
	if !ok || len(m) == 0 {
		return ctx
	}
	if sc, ok := ctx.(*share.Context); ok {
		sc.Lock()
		defer sc.Unlock()
	}
	return context.WithValue(ctx, reqMetaKey, maps.Clone(m))
}
