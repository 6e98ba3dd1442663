package batchserver_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestCodecErrorAndPanicFailOnlyTheirEntry: in one frame (written raw, so
// that the entries share it for certain), an entry whose payload its
// codec cannot decode, one whose serialize type has no codec and one
// whose handler panics each fail with their own error; the entries around
// them run and answer, and the connection stays up.
func TestCodecErrorAndPanicFailOnlyTheirEntry(t *testing.T) {
	addr, _, p := startServer(t)
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	mul := func(id uint64) codec.Entry {
		return codec.Entry{Kind: codec.KindCall, ID: id, ServicePath: "Arith", ServiceMethod: "Mul",
			SerializeType: uint8(protocol.MsgPack), Payload: mustMsgpack(testsvc.Args{A: int(id), B: 100})}
	}
	undecodable := mul(2)
	undecodable.Payload = []byte{0xc1} // never used in msgpack
	noCodec := mul(4)
	noCodec.SerializeType = 77
	panics := mul(6)
	panics.ServiceMethod = "Panic"
	rawWrite(t, raw, batchMessage(frame(1, mul(1), undecodable, mul(3), noCodec, mul(5), panics, mul(7))))
	got, _ := rawReadReplies(t, raw, 7, 5*time.Second)
	require.Len(t, got, 7)
	for _, id := range []uint64{1, 3, 5, 7} {
		rp := got[id]
		if assert.Equal(t, codec.StatusOK, rp.Status, "entry %d: %s", id, rp.Error) {
			var r testsvc.Reply
			require.NoError(t, share.Codecs[protocol.MsgPack].Decode(rp.Payload, &r))
			assert.Equal(t, int(id)*100, r.C, "entry %d", id)
		}
	}
	for id, want := range map[uint64]string{2: "", 4: "can not find codec for 77", 6: "[service internal error]: boom, method: Panic, argv: &{A:6 B:100}, stack: goroutine "} {
		rp := got[id]
		assert.Equal(t, codec.StatusError, rp.Status, "entry %d succeeded", id)
		assert.NotEmpty(t, rp.Error, "entry %d", id)
		assert.Contains(t, rp.Error, want, "entry %d", id)
	}
	assert.Equal(t, int64(2), counter(t, p.Metrics(), "rpcxbatch.server.errors.codec"))
	assert.Equal(t, int64(1), counter(t, p.Metrics(), "rpcxbatch.server.errors.panic"))

	// The connection still serves.
	rawWrite(t, raw, batchMessage(frame(2, mul(8))))
	got, _ = rawReadReplies(t, raw, 1, 5*time.Second)
	assert.Equal(t, codec.StatusOK, got[8].Status, got[8].Error)
}

// TestBadInputLoggedThroughRPCXLogger: a malformed frame, a frame before
// the handshake and a frame that never arrives are each logged through
// rpcx's logger, naming the connection that sent it.
func TestBadInputLoggedThroughRPCXLogger(t *testing.T) {
	addr, _, _ := startServer(t)

	// A frame before the handshake.
	raw := rawDial(t, addr)
	rawWrite(t, raw, batchMessage(frame(1, mulEntry(1))))
	requireClosedByPeer(t, raw, 5*time.Second)
	requireLogged(t, raw.LocalAddr().String())

	// A malformed frame: garbage where the entries should be.
	raw = rawDial(t, addr)
	rawHandshake(t, raw)
	rawWrite(t, raw, batchMessage([]byte{0x93, 0x01, 0x01, 0xc1}))
	requireClosedByPeer(t, raw, 5*time.Second)
	requireLogged(t, raw.LocalAddr().String())

	// A frame that never arrives.
	raw = rawDial(t, addr)
	rawHandshake(t, raw)
	rawWrite(t, raw, batchMessage(frame(2, mulEntry(1))))
	requireClosedByPeer(t, raw, 10*time.Second)
	requireLogged(t, raw.LocalAddr().String(), "never arrived")
}

// requireLogged waits briefly for an rpcx log line naming the client
// address from and containing parts.
func requireLogged(t *testing.T, from string, parts ...string) {
	t.Helper()
	ok := eventually(5*time.Second, func() bool {
		_, found := rpcxLog.find(append([]string{"rpcxbatch: closing connection from " + from}, parts...)...)
		return found
	})
	require.True(t, ok, "nothing logged through rpcx's logger for the connection from %s", from)
}
