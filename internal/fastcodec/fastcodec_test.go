package fastcodec_test

import (
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
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

// A Codec, reused for one payload after another, writes and reads what the
// package functions do, for every serialize type.
func TestCodecReused(t *testing.T) {
	var c fastcodec.Codec
	for _, st := range []protocol.SerializeType{protocol.MsgPack, protocol.JSON} {
		var buf []byte
		for seed := 0; seed < 20; seed++ {
			d := testsvc.NewData(seed)
			want, err := fastcodec.Encode(st, d)
			require.NoError(t, err)
			buf, err = c.Append(buf[:0], st, d)
			require.NoError(t, err)
			require.Equal(t, want, buf)
			var back testsvc.Data
			require.NoError(t, c.Decode(st, buf, &back))
			require.Equal(t, *d, back)
		}
	}
	var back testsvc.Data
	require.Error(t, c.Decode(protocol.MsgPack, []byte{0xc1}, &back), "a malformed payload")
	require.NoError(t, c.Decode(protocol.MsgPack, mustEncode(t, testsvc.NewData(1)), &back), "and the next one decodes")
	require.Equal(t, *testsvc.NewData(1), back)
	_, err := c.Append(nil, protocol.SerializeType(200), 1)
	require.ErrorIs(t, err, fastcodec.ErrNoCodec)
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := fastcodec.Encode(protocol.MsgPack, v)
	require.NoError(t, err)
	return b
}

// BenchmarkFastDecode decodes the perf harness's data payload (three
// structs of ten named integers) into a reused value with one Codec, as a
// server worker or a lane's reader does.
func BenchmarkFastDecode(b *testing.B) {
	p, err := fastcodec.Encode(protocol.MsgPack, testsvc.NewData(3))
	require.NoError(b, err)
	var c fastcodec.Codec
	var r testsvc.Data
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := c.Decode(protocol.MsgPack, p, &r); err != nil {
			b.Fatal(err)
		}
	}
}
