package batchserver_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Inspect reports what its handler's context holds.
type Inspect struct{}

// Ctx echoes request metadata "in" as response metadata "out", and answers
// C = 1 when the context carries the remote connection, +2 when it carries
// a deadline.
func (Inspect) Ctx(ctx context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	req, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	res, _ := ctx.Value(share.ResMetaDataKey).(map[string]string)
	if req == nil || res == nil {
		return errors.New("no metadata maps in the context")
	}
	res["out"] = req["in"]
	if c, ok := ctx.Value(server.RemoteConnContextKey).(net.Conn); ok && c != nil {
		r.C |= 1
	}
	if _, ok := ctx.Deadline(); ok {
		r.C |= 2
	}
	return nil
}

// TestHandlerContext: a batched handler sees the caller's metadata, the
// connection and the caller's deadline, and its response metadata reaches
// the caller, as on the plain path.
func TestHandlerContext(t *testing.T) {
	s, _ := newServer(t)
	require.NoError(t, s.RegisterName("Inspect", Inspect{}, ""))
	addr := serve(t, s)
	c := newClient(t)
	waitConnected(t, c, addr)

	ctx := context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, map[string]string{"in": "hello"})
	var r testsvc.Reply
	call := c.Go(ctx, addr, "Inspect", "Ctx", &testsvc.Args{}, &r, nil)
	select {
	case <-call.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
	}
	require.NoError(t, call.Error)
	assert.Equal(t, 3, r.C, "remote conn (1) and deadline (2) in the handler's context")
	assert.Equal(t, "hello", call.ResMetadata["out"])

	// Without a deadline the handler sees none.
	noDeadline := context.WithValue(context.Background(), share.ReqMetaDataKey, map[string]string{"in": "x"})
	r = testsvc.Reply{}
	require.NoError(t, c.Call(noDeadline, addr, "Inspect", "Ctx", &testsvc.Args{}, &r))
	assert.Equal(t, 1, r.C)
}

// TestSendHandlerFaults: sends to an unknown name are dropped and counted,
// a panicking send handler is contained, and the lane goes on delivering.
func TestSendHandlerFaults(t *testing.T) {
	addr, _, p := startServer(t)
	got := make(chan string, 8)
	require.NoError(t, p.HandleSend("boom", func(context.Context, []byte) { panic("send boom") }))
	require.NoError(t, p.HandleSend("ok", func(_ context.Context, b []byte) { got <- string(b) }))
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := batchclient.WithKey(ctxT(t, 5*time.Second), "k")
	require.NoError(t, c.Send(ctx, addr, "nobody", []byte("a")))
	require.NoError(t, c.Send(ctx, addr, "boom", []byte("b")))
	require.NoError(t, c.Send(ctx, addr, "ok", []byte("c")))
	select {
	case v := <-got:
		assert.Equal(t, "c", v)
	case <-time.After(5 * time.Second):
		t.Fatal("send after the faulty ones did not arrive")
	}
	m := p.Metrics()
	assert.Equal(t, int64(1), counter(t, m, "rpcxbatch.server.errors.unknown_send"))
	assert.Equal(t, int64(1), counter(t, m, "rpcxbatch.server.errors.panic"))
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 5}, &r))
	assert.Equal(t, 10, r.C)
}

// TestReplyFramesRespectCaps: reply frames never carry more replies than
// the batch cap, replies bigger than half the byte cap go out one per
// frame, and every call gets its own reply.
func TestReplyFramesRespectCaps(t *testing.T) {
	addr, _, p := startServer(t, batchserver.WithBatchCap(4), batchserver.WithMaxFrameBytes(256<<10))
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 10*time.Second)

	const n = 200
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		if err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r); err != nil {
			return err
		} else if r.C != 3*i {
			return errors.New("wrong reply")
		}
		return nil
	})
	h := p.Metrics().Get("rpcxbatch.server.reply_batch_size").(interface{ Max() int64 })
	assert.LessOrEqual(t, h.Max(), int64(4))

	// Replies of ~150 KiB: two do not fit one 256 KiB frame.
	before := counter(t, p.Metrics(), "rpcxbatch.server.reply_frames")
	const big = 8
	concurrently(t, big, func(i int) error {
		in := make([]byte, 150<<10)
		in[0] = byte(i)
		var out []byte
		if err := c.Call(ctx, addr, "Echo", "Bytes", &in, &out); err != nil {
			return err
		} else if len(out) != len(in) || out[0] != byte(i) {
			return errors.New("wrong echo")
		}
		return nil
	})
	assert.GreaterOrEqual(t, counter(t, p.Metrics(), "rpcxbatch.server.reply_frames")-before, int64(big))
}

// TestWriteTimeoutDropsAClientThatDoesNotRead: a peer that sends calls but
// never reads their replies is disconnected after the write timeout; other
// clients are not held up.
func TestWriteTimeoutDropsAClientThatDoesNotRead(t *testing.T) {
	addr, _, p := startServer(t, batchserver.WithWriteTimeout(200*time.Millisecond))
	c := newClient(t)
	waitConnected(t, c, addr)

	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	payload := mustMsgpack(make([]byte, 1<<20))
	// 64 MiB of replies: far more than the socket buffers hold.
	for seq := uint64(1); seq <= 64; seq++ {
		e := codec.Entry{Kind: codec.KindCall, ID: seq, ServicePath: "Echo", ServiceMethod: "Bytes",
			SerializeType: uint8(protocol.MsgPack), Payload: payload}
		require.NoError(t, raw.SetWriteDeadline(time.Now().Add(3*time.Second)))
		if _, err := raw.Write(batchMessage(frame(seq, e))); err != nil {
			break // the server already gave up on us
		}
	}
	ok := eventually(5*time.Second, func() bool { return counter(t, p.Metrics(), "rpcxbatch.server.errors.write") > 0 })
	require.True(t, ok, "the server never gave up writing to a peer that does not read")

	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 3}, &r))
	assert.Equal(t, 9, r.C)
	requireClosedByPeer(t, raw, 5*time.Second)
}
