package fastcodec

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/smallnest/rpcx/protocol"
)

// The differential harness: every case runs through rpcx's own msgpack
// codec (the oracle, rpcxCodec) and through each entry point batchclient
// and batchserver use (Encode, Append after a prefix, and a Codec reused
// from case to case, as a lane or a worker reuses its own), and must come
// out the same: bytes, decoded values, error text or none, panic or none.

// entryPoint is one way into this package.
type entryPoint struct {
	name string
	enc  func(v any) ([]byte, error)
	dec  func(b []byte, v any) error
}

// diff holds the entry points of one test; its Codec is reused across the
// test's cases so that state one case leaves behind shows in the next.
type diff struct {
	t      testing.TB
	c      Codec
	points []entryPoint
}

func newDiff(t testing.TB) *diff {
	d := &diff{t: t}
	prefix := []byte{0xa5, 0x5a, 0x01}
	d.points = []entryPoint{
		{"Encode/Decode", func(v any) ([]byte, error) { return Encode(protocol.MsgPack, v) },
			func(b []byte, v any) error { return Decode(protocol.MsgPack, b, v) }},
		{"Append", func(v any) ([]byte, error) {
			out, err := Append(append([]byte(nil), prefix...), protocol.MsgPack, v)
			if !bytes.Equal(out[:len(prefix)], prefix) {
				return nil, fmt.Errorf("Append overwrote the prefix: %x", out[:len(prefix)])
			}
			return out[len(prefix):], err
		}, nil},
		{"Codec", func(v any) ([]byte, error) { return d.c.Append(nil, protocol.MsgPack, v) },
			func(b []byte, v any) error { return d.c.Decode(protocol.MsgPack, b, v) }},
	}
	return d
}

// outcome is an error's text, or a panic's, or "" for success.
func outcome(f func() error) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("panic: %v", r)
		}
	}()
	if err := f(); err != nil {
		return "error: " + err.Error()
	}
	return ""
}

// encode requires every entry point to encode v as rpcx does, and returns
// rpcx's bytes (nil if rpcx fails).
func (d *diff) encode(v any) []byte {
	d.t.Helper()
	var want []byte
	wantOut := outcome(func() (err error) { want, err = rpcxCodec().Encode(v); return err })
	for _, p := range d.points {
		var got []byte
		gotOut := outcome(func() (err error) { got, err = p.enc(v); return err })
		if gotOut != wantOut {
			d.t.Fatalf("%s: encoding %T %+v: rpcx %q, fastcodec %q", p.name, v, v, wantOut, gotOut)
		}
		if wantOut == "" && !bytes.Equal(want, got) {
			d.t.Fatalf("%s: encoding %T %+v:\nrpcx      %x\nfastcodec %x", p.name, v, v, want, got)
		}
	}
	if wantOut != "" {
		return nil
	}
	return want
}

// decode requires every entry point to decode b into the value newDst
// returns (a pointer, zero or prefilled) as rpcx does: the same outcome,
// and the same value after it, whether or not it failed. It returns
// rpcx's value and whether rpcx decoded without error.
func (d *diff) decode(b []byte, newDst func() any) (any, bool) {
	d.t.Helper()
	want := newDst()
	wantOut := outcome(func() error { return rpcxCodec().Decode(b, want) })
	for _, p := range d.points {
		if p.dec == nil {
			continue
		}
		got := newDst()
		gotOut := outcome(func() error { return p.dec(b, got) })
		if gotOut != wantOut {
			d.t.Fatalf("%s: decoding %x into %T: rpcx %q, fastcodec %q", p.name, b, want, wantOut, gotOut)
		}
		if where := differ(reflect.ValueOf(want), reflect.ValueOf(got), ""); where != "" {
			d.t.Fatalf("%s: decoding %x into %T (%s): values differ at %s\nrpcx      %+v\nfastcodec %+v",
				p.name, b, want, wantOut, where, deref(want), deref(got))
		}
	}
	return want, wantOut == ""
}

func deref(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

// differ compares a and b deeply, unexported fields included and floats by
// their bits, and returns where they first differ, or "".
func differ(a, b reflect.Value, path string) string {
	if a.IsValid() != b.IsValid() {
		return path + " (validity)"
	}
	if !a.IsValid() {
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s (type %v vs %v)", path, a.Type(), b.Type())
	}
	a, b = readable(a), readable(b)
	switch a.Kind() {
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return path
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return path
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if a.Uint() != b.Uint() {
			return path
		}
	case reflect.Float32:
		if math.Float32bits(float32(a.Float())) != math.Float32bits(float32(b.Float())) {
			return path
		}
	case reflect.Float64:
		if math.Float64bits(a.Float()) != math.Float64bits(b.Float()) {
			return path
		}
	case reflect.String:
		if a.String() != b.String() {
			return path
		}
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() != b.IsNil() {
			return path + " (nil)"
		}
		if a.Kind() == reflect.Pointer && a.Pointer() == b.Pointer() {
			return ""
		}
		if !a.IsNil() {
			return differ(a.Elem(), b.Elem(), path+".*")
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return path + " (nil)"
		}
		if a.Type().Elem().Kind() == reflect.Uint8 {
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				return path
			}
			return ""
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			return path + " (len)"
		}
		for i := 0; i < a.Len(); i++ {
			if w := differ(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); w != "" {
				return w
			}
		}
	case reflect.Map:
		if a.IsNil() != b.IsNil() {
			return path + " (nil)"
		}
		if a.Len() != b.Len() {
			return path + " (len)"
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s[%v] (missing)", path, k)
			}
			if w := differ(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k)); w != "" {
				return w
			}
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if w := differ(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); w != "" {
				return w
			}
		}
	default:
		panic(fmt.Sprintf("differ: kind %v at %s", a.Kind(), path))
	}
	return ""
}

// readable returns v as an addressable value not marked read-only, so that
// the fields of unexported fields can be read and recursed into.
func readable(v reflect.Value) reflect.Value {
	if !v.CanAddr() {
		c := reflect.New(v.Type()).Elem()
		if v.CanInterface() {
			c.Set(v)
			return c
		}
		// Only values reached through an addressable struct are
		// read-only here, and those are addressable.
		panic("differ: unaddressable read-only value")
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}
