package plainconn_test

import (
	"bytes"
	"encoding/gob"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

type preArgs struct {
	A    int
	Name string
	Tags []string
}

// gobCodec stands for a codec of the user's, which PreEncode does not know.
type gobCodec struct{}

func (gobCodec) Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(v)
	return b.Bytes(), err
}

func (gobCodec) Decode(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// TestPreEncodeWritesTheSameBytes: what PreEncode hands rpcx encodes,
// with rpcx's codec, to the bytes the caller's arguments encode to, for
// every codec (a user's too); and a change to the arguments after
// PreEncode does not reach those bytes.
func TestPreEncodeWritesTheSameBytes(t *testing.T) {
	const gobType = protocol.SerializeType(97)
	share.RegisterCodec(gobType, gobCodec{})
	t.Cleanup(func() { delete(share.Codecs, gobType) })
	for _, st := range []protocol.SerializeType{protocol.MsgPack, protocol.JSON, gobType} {
		args := &preArgs{A: 7, Name: "<ann & bob>", Tags: []string{"x", "y"}}
		want, err := share.Codecs[st].Encode(args)
		require.NoError(t, err)
		got, err := plainconn.PreEncode(st, args)
		require.NoError(t, err)
		args.A, args.Tags[0] = -1, "changed"
		b, err := share.Codecs[st].Encode(got)
		require.NoError(t, err, "serialize type %d", st)
		require.Equal(t, want, b, "serialize type %d", st)
	}
	raw := []byte("payload")
	got, err := plainconn.PreEncode(protocol.SerializeNone, raw)
	require.NoError(t, err)
	raw[0] = 'X'
	b, err := share.Codecs[protocol.SerializeNone].Encode(got)
	require.NoError(t, err)
	require.Equal(t, "payload", string(b))
	_, err = plainconn.PreEncode(protocol.SerializeNone, 42)
	require.Error(t, err, "the byte codec fails a non-[]byte as rpcx's send would")
}
