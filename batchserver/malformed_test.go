package batchserver_test

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

func mulEntry(id uint64) codec.Entry {
	return codec.Entry{Kind: codec.KindCall, ID: id, ServicePath: "Arith", ServiceMethod: "Mul",
		SerializeType: uint8(protocol.MsgPack), Payload: mustMsgpack(testsvc.Args{A: 2, B: 21})}
}

// hugeBin is a frame of one entry whose payload declares 0xFFFFFFF0 bytes.
func hugeBin() []byte {
	e := mulEntry(1)
	e.Payload = []byte{'x'}
	b := frame(1, e)
	// The entry ends with bin8 "x" (c4 01 78) and timeout 0 (00).
	tail := b[len(b)-4:]
	if tail[0] != 0xc4 || tail[1] != 1 || tail[2] != 'x' || tail[3] != 0 {
		panic("unexpected entry encoding")
	}
	b = append(b[:len(b)-4], 0xc6, 0xff, 0xff, 0xff, 0xf0, 'x', 0)
	return b
}

// overCap declares more entries than the server's batch cap.
func overCap() []byte {
	return codec.AppendBatchHeader(nil, 1, 1001)
}

// TestMalformedFrameClosesOnlyThatConnection: each kind of bad frame makes
// the server close the raw connection that sent it, while a well-behaved
// client on the same server keeps working.
func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	addr, _, p := startServer(t)
	c := newClient(t)
	waitConnected(t, c, addr)
	call := func() {
		t.Helper()
		var r testsvc.Reply
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
		require.Equal(t, 42, r.C)
	}
	good := frame(1, mulEntry(1))
	unknownKind := mulEntry(1)
	unknownKind.Kind = 9

	cases := []struct {
		name     string
		messages [][]byte
	}{
		{"garbage payload", [][]byte{batchMessage([]byte("this is not a batch frame at all"))}},
		{"empty payload", [][]byte{batchMessage(nil)}},
		{"truncated frame", [][]byte{batchMessage(good[:len(good)-3])}},
		{"trailing bytes", [][]byte{batchMessage(append(append([]byte(nil), good...), 0xc0))}},
		{"unknown entry kind 9", [][]byte{batchMessage(frame(1, unknownKind))}},
		{"huge declared bin length", [][]byte{batchMessage(hugeBin())}},
		{"more entries than the cap", [][]byte{batchMessage(overCap())}},
		{"wrong version", [][]byte{batchMessage(append([]byte{0x93, 0x07}, good[2:]...))}},
		{"frame sequence repeated", [][]byte{batchMessage(good), batchMessage(good)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call()
			before := counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed")
			raw := rawDial(t, addr)
			rawHandshake(t, raw) // a lane handshakes first; the frames that follow are bad
			for _, m := range tc.messages {
				rawWrite(t, raw, m)
			}
			requireClosedByPeer(t, raw, 2*time.Second)
			assert.Equal(t, before+1, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))
			call()
			assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
		})
	}
}

// TestHugeDeclaredMessageLength: an rpcx message declaring 0xFFFFFFF0 bytes
// makes the server close the connection without allocating them, once the
// user has set rpcx's cap (protocol.MaxMessageLength, as TestMain does
// before any server serves): rpcx reads every message, batch frames
// included, and without a cap allocates what one declares, on a batch
// server as on a plain one; batchserver.New leaves the cap as it finds it.
func TestHugeDeclaredMessageLength(t *testing.T) {
	require.NotZero(t, protocol.MaxMessageLength, "TestMain sets rpcx's cap")
	addr, _, _ := startServer(t)
	c := newClient(t)
	waitConnected(t, c, addr)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))

	msg := codec.AppendMessage(nil, reqHeader(true), codec.ServicePath, codec.MethodBatch, nil, frame(1, mulEntry(1)))
	binary.BigEndian.PutUint32(msg[12:16], 0xFFFFFFF0)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	raw := rawDial(t, addr)
	rawWrite(t, raw, msg)
	requireClosedByPeer(t, raw, 2*time.Second)
	runtime.ReadMemStats(&after)

	const limit = 256 << 20
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(limit), "HeapAlloc grew")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(limit), "bytes allocated while refusing the message")

	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 2}, &r))
	require.Equal(t, 4, r.C)
}

// A batch frame on a connection that never handshook is refused the same
// way: closed, counted, logged.
func TestFrameBeforeHandshakeClosesConnection(t *testing.T) {
	addr, _, p := startServer(t)
	before := counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed")
	raw := rawDial(t, addr)
	rawWrite(t, raw, batchMessage(frame(1, mulEntry(1))))
	requireClosedByPeer(t, raw, 2*time.Second)
	assert.Equal(t, before+1, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))
}

// A frame that never arrives (rpcx may drop a frame, for example under a
// rate-limiting plugin) does not leave the lane waiting forever: the
// connection is closed and counted as malformed, and the server goes on
// serving other connections. (A batchclient lane whose connection closes
// reconnects; that is the client's lane-failure path, tested there.)
func TestMissingFrameClosesConnection(t *testing.T) {
	addr, _, p := startServer(t)
	before := counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed")
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	rawWrite(t, raw, batchMessage(frame(2, mulEntry(1)))) // frame 1 never comes
	requireClosedByPeer(t, raw, 5*time.Second)
	assert.Equal(t, before+1, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.calls"), "the frame behind the gap ran")

	c := newClient(t)
	waitConnected(t, c, addr)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 7}, &r))
	require.Equal(t, 21, r.C)
}
