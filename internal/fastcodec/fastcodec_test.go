package fastcodec_test

import (
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/testsvc"
)

// The fast path writes the bytes rpcx's codec writes and reads what it
// reads, for every serialize type rpcx registers.
func TestSameBytesAsRPCX(t *testing.T) {
	for _, st := range []protocol.SerializeType{protocol.MsgPack, protocol.JSON} {
		for seed := 0; seed < 50; seed += 7 {
			d := testsvc.NewData(seed)
			want, err := share.Codecs[st].Encode(d)
			require.NoError(t, err)
			got, err := fastcodec.Encode(st, d)
			require.NoError(t, err)
			require.Equal(t, want, got, "serialize type %d", st)
			var back testsvc.Data
			require.NoError(t, fastcodec.Decode(st, got, &back))
			require.Equal(t, *d, back)
		}
	}
	_, err := fastcodec.Encode(protocol.SerializeType(200), 1)
	require.ErrorIs(t, err, fastcodec.ErrNoCodec)
}

func BenchmarkRPCXCodec(b *testing.B) {
	d := testsvc.NewData(3)
	c := share.Codecs[protocol.MsgPack]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, _ := c.Encode(d)
		var r testsvc.Data
		_ = c.Decode(p, &r)
	}
}

func BenchmarkFastCodec(b *testing.B) {
	d := testsvc.NewData(3)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, _ := fastcodec.Encode(protocol.MsgPack, d)
		var r testsvc.Data
		_ = fastcodec.Decode(protocol.MsgPack, p, &r)
	}
}

// Append writes the same bytes after what dst holds, for every serialize
// type, and reuses dst's storage when it has room.
func TestAppend(t *testing.T) {
	d := testsvc.NewData(5)
	for _, st := range []protocol.SerializeType{protocol.MsgPack, protocol.JSON} {
		want, err := share.Codecs[st].Encode(d)
		require.NoError(t, err)
		dst := make([]byte, 3, 1024)
		copy(dst, "abc")
		got, err := fastcodec.Append(dst, st, d)
		require.NoError(t, err)
		require.Equal(t, "abc", string(got[:3]))
		require.Equal(t, want, got[3:], "serialize type %d", st)
		require.Same(t, &dst[0], &got[0], "room in dst: no new storage")
	}
	_, err := fastcodec.Append(nil, protocol.SerializeType(200), 1)
	require.ErrorIs(t, err, fastcodec.ErrNoCodec)
}
