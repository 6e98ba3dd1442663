package main

import (
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// order is a service's argument type the tool does not know: the JSON's
// generic value must decode into it with rpcx's codecs.
type order struct {
	Item  string
	Qty   int
	Price float64
	Tags  []string
	Big   uint64
}

// TestArgValueDecodesIntoTheServicesType: integral JSON numbers stay
// integers (msgpack will not decode a float into an int field), others
// floats, and the value decodes into the service's struct with msgpack
// and JSON alike; with SerializeNone the bytes go as they are.
func TestArgValueDecodesIntoTheServicesType(t *testing.T) {
	raw := []byte(`{"Item": "tea", "Qty": 3, "Price": 2.5, "Tags": ["a", "b"], "Big": 18446744073709551615}`)
	for _, st := range []protocol.SerializeType{protocol.MsgPack, protocol.JSON} {
		v, err := argValue(raw, st)
		require.NoError(t, err)
		m := v.(map[string]any)
		assert.IsType(t, int64(0), m["Qty"])
		assert.IsType(t, float64(0), m["Price"])
		assert.IsType(t, uint64(0), m["Big"])
		b, err := share.Codecs[st].Encode(v)
		require.NoError(t, err)
		var o order
		require.NoError(t, share.Codecs[st].Decode(b, &o), "serialize type %d", st)
		assert.Equal(t, order{Item: "tea", Qty: 3, Price: 2.5, Tags: []string{"a", "b"}, Big: 1<<64 - 1}, o)
	}
	v, err := argValue([]byte("raw bytes"), protocol.SerializeNone)
	require.NoError(t, err)
	assert.Equal(t, []byte("raw bytes"), *v.(*[]byte))

	for in, want := range map[string]string{
		``:            "-args is not JSON: it is empty",
		`{"Item": `:   "-args is not JSON: it ends too soon",
		`{"A": 1} {}`: "-args is not one JSON value: more follows it",
		`{"A": tea}`:  "-args is not JSON: invalid character 'e' in literal true (expecting 'r') at byte 8",
	} {
		_, err := argValue([]byte(in), protocol.MsgPack)
		require.ErrorIs(t, err, ErrArgs, in)
		assert.EqualError(t, err, want, in)
	}
}
