package batchserver_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// holderCast is a cast of payload to Holder.Take, as a lane encodes it.
func holderCast(payload []byte) codec.Entry {
	return codec.Entry{Kind: codec.KindCast, ServicePath: "Holder", ServiceMethod: "Take",
		SerializeType: uint8(protocol.SerializeNone), Payload: payload}
}

// startHolder serves a Holder behind the batch plugin; the handlers are
// released when the test ends.
func startHolder(t *testing.T, opts ...batchserver.Option) (string, *Holder, *batchserver.Plugin) {
	t.Helper()
	h := &Holder{release: make(chan struct{})}
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Holder", h, ""))
	p, err := batchserver.New(s, opts...)
	require.NoError(t, err)
	addr := serve(t, s)
	t.Cleanup(h.Release)
	return addr, h, p
}

// TestRawClientBeyondTheByteWindowIsClosed: a client that ignores the byte
// window (raw frames of 1 MiB casts to a handler that blocks, with the
// default window of 8 MiB) has its connection closed once it makes the
// server hold twice the window, instead of the server holding whatever it
// sends (the entry window alone let 16,384 such frames in).
func TestRawClientBeyondTheByteWindowIsClosed(t *testing.T) {
	const frames = 40 // 40 MiB, five times the default byte window
	addr, h, p := startHolder(t, batchserver.WithPoolSize(1))
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	payload := make([]byte, 1<<20)
	go func() {
		// The server closes the connection part way: later writes fail.
		for seq := uint64(1); seq <= frames; seq++ {
			raw.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := raw.Write(batchMessage(frame(seq, holderCast(payload)))); err != nil {
				return
			}
		}
	}()
	requireClosedByPeer(t, raw, 20*time.Second)
	line, found := rpcxLog.find("closing connection from "+raw.LocalAddr().String(), "byte window")
	require.True(t, found, "the connection was not closed for its byte window")
	t.Log(line)
	require.Positive(t, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))
	started := h.started.Load()
	require.LessOrEqual(t, started, int64(16), "the server ran more than twice the byte window of 1 MiB casts")
}
