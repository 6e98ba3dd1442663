package plainconn

import (
	"reflect"

	rpcxcodec "github.com/smallnest/rpcx/codec"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
)

// PreEncode returns what to hand rpcx's Client.Go as a call's arguments
// so that rpcx never reads the caller's args once the caller has
// returned: rpcx v1.9.4 encodes them on a goroutine of its own (client.go,
// send), after Go returned, and a caller that changes or reuses args then
// races with it, and may have its change sent. args is encoded here, on
// the caller's goroutine, with the codec rpcx will use (share.Codecs[st]),
// and rpcx gets a value its codec writes as those very bytes. A codec
// error is returned as rpcx's send would fail the call with it.
//
// For rpcx's own msgpack, JSON, protobuf and byte codecs the bytes are
// handed over as they are. For any other codec (thrift, a codec of the
// user's) rpcx gets a copy of args decoded from them, which its codec
// encodes again. A serialize type with no codec is left to rpcx, which
// fails the call with client.ErrUnsupportedCodec without reading args.
func PreEncode(st protocol.SerializeType, args any) (any, error) {
	cd, data, err := Encode(st, args)
	if cd == nil {
		return args, nil
	}
	if err != nil {
		return nil, err
	}
	if isByteCodec(cd) {
		// Its Encode returns the caller's own slice.
		data = append([]byte{}, data...)
	}
	return EncodedArgs(cd, data, args), nil
}

// Encode encodes args with the codec of serialize type st, as rpcx's
// client does: cd is nil when st has none (rpcx then fails the call with
// client.ErrUnsupportedCodec without reading args), err the codec's error.
func Encode(st protocol.SerializeType, args any) (cd rpcxcodec.Codec, data []byte, err error) {
	if cd = share.Codecs[st]; cd == nil {
		return nil, nil, nil
	}
	data, err = cd.Encode(args)
	return cd, data, err
}

// EncodedArgs returns arguments that the codec cd encodes as data, which
// become theirs (the caller leaves data alone): rpcx's msgpack, JSON and
// protobuf codecs write Encoded as it is (JSON compacted, as json.Marshal
// checks what a Marshaler returns), and its byte codec a []byte. For any
// other codec, a fresh value of args' type decoded from data, which the
// codec encodes again; where data does not decode into one, args itself.
func EncodedArgs(cd rpcxcodec.Codec, data []byte, args any) any {
	switch {
	case isByteCodec(cd):
		return data
	case writesEncoded(cd):
		return Encoded(data)
	}
	return decodedCopy(cd, data, args)
}

// isByteCodec reports whether cd is rpcx's byte codec.
func isByteCodec(cd rpcxcodec.Codec) bool {
	switch cd.(type) {
	case *rpcxcodec.ByteCodec, rpcxcodec.ByteCodec:
		return true
	}
	return false
}

// writesEncoded reports whether cd writes Encoded as it is: rpcx's
// msgpack, JSON and protobuf codecs.
func writesEncoded(cd rpcxcodec.Codec) bool {
	switch cd.(type) {
	case *rpcxcodec.MsgpackCodec, rpcxcodec.MsgpackCodec,
		*rpcxcodec.JSONCodec, rpcxcodec.JSONCodec,
		*rpcxcodec.PBCodec, rpcxcodec.PBCodec:
		return true
	}
	return false
}

// decodedCopy is a fresh value of args' type decoded from data, or args
// itself when there is no such value to decode into (a nil or non-pointer
// interface value the codec cannot fill) or the codec cannot decode it.
func decodedCopy(cd rpcxcodec.Codec, data []byte, args any) any {
	if args == nil {
		return nil
	}
	t := reflect.TypeOf(args)
	if t.Kind() == reflect.Pointer {
		cp := reflect.New(t.Elem())
		if cd.Decode(data, cp.Interface()) != nil {
			return args
		}
		return cp.Interface()
	}
	cp := reflect.New(t)
	if cd.Decode(data, cp.Interface()) != nil {
		return args
	}
	return cp.Elem().Interface()
}

// Encoded is arguments encoded already: rpcx's msgpack codec (msgp's
// Marshaler), JSON codec (json.Marshaler) and protobuf codec (gogo's
// proto.Marshaler) each write it as it is.
type Encoded []byte

// MarshalMsg appends the encoded arguments to b (msgp.Marshaler).
func (e Encoded) MarshalMsg(b []byte) ([]byte, error) { return append(b, e...), nil }

// MarshalJSON returns the encoded arguments (json.Marshaler).
func (e Encoded) MarshalJSON() ([]byte, error) { return e, nil }

// Marshal returns the encoded arguments (gogo protobuf's proto.Marshaler).
func (e Encoded) Marshal() ([]byte, error) { return e, nil }
