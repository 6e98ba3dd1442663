package batchserver_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// gzipZeros is n zero bytes, gzipped: a few hundred times smaller.
func gzipZeros(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	chunk := make([]byte, 1<<20)
	for ; n > 0; n -= len(chunk) {
		_, err := w.Write(chunk[:min(n, len(chunk))])
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// allocatedBy is the bytes the process allocated while fn ran.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCompressedEntryInflatesWithinTheFrameCap: the plugin inflates each
// compressed entry itself, through the frame's byte cap, so what it
// decodes is capped before it is allocated. A compressed call entry is
// inflated and answered; an entry of 64 KiB that inflates to 64 MiB
// closes its connection with no more than a few times the 16 MiB cap
// allocated, while a plain rpcx request flagged compressed with the same
// bytes makes rpcx inflate all of it (rpcx inflates before any plugin or
// handler sees a message; the docs say so), and a batch client on the
// same server goes on.
func TestCompressedEntryInflatesWithinTheFrameCap(t *testing.T) {
	addr, _, p := startServer(t)
	c := newClient(t)
	waitConnected(t, c, addr)

	// A well-formed compressed entry runs.
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	e := mulEntry(1)
	z, err := codec.Compress(protocol.Gzip, e.Payload)
	require.NoError(t, err)
	e.Payload, e.CompressType = z, protocol.Gzip
	rawWrite(t, raw, batchMessage(frame(1, e)))
	got, _ := rawReadReplies(t, raw, 1, 5*time.Second)
	require.Equal(t, codec.StatusOK, got[1].Status, got[1].Error)
	var r testsvc.Reply
	require.NoError(t, share.Codecs[protocol.MsgPack].Decode(got[1].Payload, &r))
	require.Equal(t, 42, r.C)

	const bombed = 64 << 20
	bomb := gzipZeros(t, bombed)
	t.Logf("%d bytes inflating to %d", len(bomb), bombed)
	before := counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed")
	batchAlloc := allocatedBy(func() {
		raw := rawDial(t, addr)
		rawHandshake(t, raw)
		e := mulEntry(1)
		e.Payload, e.CompressType = bomb, protocol.Gzip
		rawWrite(t, raw, batchMessage(frame(1, e)))
		requireClosedByPeer(t, raw, 10*time.Second)
	})
	assert.Equal(t, before+1, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))

	// The same bytes as a plain rpcx request flagged compressed.
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	plainAddr := serve(t, s)
	plainAlloc := allocatedBy(func() {
		conn, err := net.DialTimeout("tcp", plainAddr, 3*time.Second)
		require.NoError(t, err)
		defer conn.Close()
		h := reqHeader(false)
		h.SetSerializeType(protocol.MsgPack)
		h.SetCompressType(protocol.Gzip)
		rawWrite(t, conn, codec.AppendMessage(nil, h, "Arith", "Mul", nil, bomb))
		// rpcx answers with the decode error of the inflated zeros.
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, _, _ = codec.ReadMessage(conn, 1<<20, nil)
	})
	t.Logf("allocated: batch server %d MiB, plain rpcx %d MiB", batchAlloc>>20, plainAlloc>>20)
	assert.Less(t, batchAlloc, uint64(48<<20), "the plugin inflated beyond its cap")
	assert.Greater(t, plainAlloc, uint64(bombed), "rpcx inflates a compressed request whole")

	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	require.Equal(t, 42, r.C)
}

// TestLyingGzipTrailerAllocatesNoMore: the size a gzip trailer declares is
// only a hint for the buffer, and a hostile entry's trailer may lie: 26
// bytes declaring 15 MiB must not make the server allocate 15 MiB (they
// inflate to 2 bytes and fail their checksum), as the same bytes flagged
// compressed in a plain rpcx request make rpcx allocate nothing of the
// kind.
func TestLyingGzipTrailerAllocatesNoMore(t *testing.T) {
	addr, _, _ := startServer(t)
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write([]byte("hi"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	lie := buf.Bytes()
	binary.LittleEndian.PutUint32(lie[len(lie)-4:], 15<<20)
	alloc := allocatedBy(func() {
		raw := rawDial(t, addr)
		rawHandshake(t, raw)
		e := mulEntry(1)
		e.Payload, e.CompressType = lie, protocol.Gzip
		rawWrite(t, raw, batchMessage(frame(1, e)))
		requireClosedByPeer(t, raw, 10*time.Second)
	})
	t.Logf("%d bytes declaring 15 MiB: %d bytes allocated", len(lie), alloc)
	assert.Less(t, alloc, uint64(2<<20), "the trailer's size was taken for the buffer")
}
