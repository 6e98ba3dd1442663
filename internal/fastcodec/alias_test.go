package fastcodec_test

import (
	"bytes"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// rpcx's ByteCodec returns a []byte argument itself and decodes by
// aliasing its input. What fastcodec returns must be the caller's all the
// same: writing to an encoding leaves the value alone, and reusing the
// bytes a value was decoded from leaves the value alone.
func TestNoAliasingWithByteCodec(t *testing.T) {
	orig := []byte("the caller's own bytes")
	for _, dst := range [][]byte{nil, make([]byte, 0, 64)} {
		arg := bytes.Clone(orig)
		for _, v := range []any{arg, &arg} {
			enc, err := fastcodec.Append(dst, protocol.SerializeNone, v)
			require.NoError(t, err)
			require.Equal(t, orig, enc)
			for i := range enc {
				enc[i] = '!'
			}
			require.Equal(t, orig, arg, "writing to the encoding changed the argument")
		}
	}
	enc, err := fastcodec.Encode(protocol.SerializeNone, orig)
	require.NoError(t, err)
	enc[0] = '!'
	require.Equal(t, byte('t'), orig[0], "writing to Encode's result changed the argument")

	data := bytes.Clone(orig)
	var got []byte
	require.NoError(t, fastcodec.Decode(protocol.SerializeNone, data, &got))
	for i := range data {
		data[i] = '?'
	}
	require.Equal(t, orig, got, "reusing the decoded bytes changed the value")
}
