package fastcodec

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// regOnPtr has a codec registered on its pointer type only: the library
// uses it for a top-level *regOnPtr, which is what rpcx hands it.
type regOnPtr struct {
	A int
	B string
}

func init() {
	msgpack.Register((*regOnPtr)(nil),
		func(e *msgpack.Encoder, v reflect.Value) error {
			if v.IsNil() {
				return e.EncodeNil()
			}
			r := v.Elem()
			return e.EncodeString(fmt.Sprintf("regOnPtr:%d:%s", r.Field(0).Int(), r.Field(1).String()))
		},
		func(d *msgpack.Decoder, v reflect.Value) error {
			s, err := d.DecodeString()
			if err != nil {
				return err
			}
			v.Set(reflect.ValueOf(&regOnPtr{B: s}))
			return nil
		})
}

// A codec registered with msgpack.Register((*T)(nil), ...) is what rpcx
// writes for a *T argument: fastcodec writes it too.
func TestRegisterOnPointerType(t *testing.T) {
	v := &regOnPtr{A: 7, B: "seven"}
	want, err := rpcxCodec().Encode(v)
	require.NoError(t, err)
	require.Equal(t, append([]byte{0xb0}, "regOnPtr:7:seven"...), want, "the library runs the registered encoder")
	got, err := Encode(protocol.MsgPack, v)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
