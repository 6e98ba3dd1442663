package batchserver_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// authGood is an AuthFunc that accepts the token "good" only.
func authGood(_ context.Context, _ *protocol.Message, token string) error {
	if token != "good" {
		return errors.New("invalid token")
	}
	return nil
}

// authMeta is rpcx request metadata carrying token.
func authMeta(token string) map[string]string {
	if token == "" {
		return nil
	}
	return map[string]string{share.AuthKey: token}
}

// rawAuthHandshake is rawHandshake with a frame-level token.
func rawAuthHandshake(t *testing.T, c net.Conn, token string) {
	t.Helper()
	rawWrite(t, c, codec.AppendMessage(nil, reqHeader(false), codec.ServicePath, codec.MethodHandshake, authMeta(token), nil))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
	for i := 0; i < 16; i++ {
		msg, _, err := codec.ReadMessage(c, 1<<20, nil)
		require.NoError(t, err)
		if msg.Header.MessageType() != protocol.Response || msg.Header.IsHeartbeat() {
			continue
		}
		require.NotEqual(t, protocol.Error, msg.Header.MessageStatusType(), msg.Metadata[protocol.ServiceError])
		return
	}
	t.Fatal("no handshake response")
}

// authEntry is a call of Arith.Mul(id, 10) whose entry carries token.
func authEntry(id uint64, token string) codec.Entry {
	return codec.Entry{Kind: codec.KindCall, ID: id, ServicePath: "Arith", ServiceMethod: "Mul",
		Metadata: authMeta(token), SerializeType: uint8(protocol.MsgPack),
		Payload: mustMsgpack(testsvc.Args{A: int(id), B: 10})}
}

// TestAuthEveryEntryOfOneFrame: the entries of one frame (written raw, so
// that they share it for certain) are each checked with AuthFunc, in every
// position of the frame: good ones run, the others fail with the
// AuthFunc's error.
func TestAuthEveryEntryOfOneFrame(t *testing.T) {
	addr, s, p := startServer(t)
	s.AuthFunc = authGood
	raw := rawDial(t, addr)
	rawAuthHandshake(t, raw, "good")
	tokens := []string{"good", "bad", "good", "", "bad", "good"}
	entries := make([]codec.Entry, len(tokens))
	for i, tok := range tokens {
		entries[i] = authEntry(uint64(i+1), tok)
	}
	rawWrite(t, raw, codec.AppendMessage(nil, reqHeader(true), codec.ServicePath, codec.MethodBatch, authMeta("good"), frame(1, entries...)))
	got, _ := rawReadReplies(t, raw, len(tokens), 5*time.Second)
	require.Len(t, got, len(tokens))
	rejected := 0
	for i, tok := range tokens {
		id := uint64(i + 1)
		rp := got[id]
		if tok == "good" {
			if assert.Equal(t, codec.StatusOK, rp.Status, "entry %d (token %q): %s", id, tok, rp.Error) {
				var r testsvc.Reply
				require.NoError(t, share.Codecs[protocol.MsgPack].Decode(rp.Payload, &r))
				assert.Equal(t, int(id)*10, r.C, "entry %d", id)
			}
			continue
		}
		rejected++
		assert.Equal(t, codec.StatusError, rp.Status, "entry %d (token %q) ran", id, tok)
		assert.Equal(t, "invalid token", rp.Error, "entry %d", id)
	}
	assert.Equal(t, int64(rejected), counter(t, p.Metrics(), "rpcxbatch.server.errors.auth"))
}

// TestAuthEveryFrameAfterHandshake: a good handshake is no pass for later
// frames. rpcx checks AuthFunc on every message, so a frame whose own
// token is bad is refused and none of its entries run.
func TestAuthEveryFrameAfterHandshake(t *testing.T) {
	addr, s, p := startServer(t)
	s.AuthFunc = authGood
	raw := rawDial(t, addr)
	rawAuthHandshake(t, raw, "good")
	rawWrite(t, raw, codec.AppendMessage(nil, reqHeader(true), codec.ServicePath, codec.MethodBatch, authMeta("good"), frame(1, authEntry(1, "good"))))
	got, _ := rawReadReplies(t, raw, 1, 5*time.Second)
	require.Equal(t, codec.StatusOK, got[1].Status, got[1].Error)

	rawWrite(t, raw, codec.AppendMessage(nil, reqHeader(true), codec.ServicePath, codec.MethodBatch, authMeta("bad"), frame(2, authEntry(2, "good"))))
	// rpcx closes the connection of a refused oneway message; no reply
	// frame for entry 2 may come first.
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(5*time.Second)))
	for i := 0; ; i++ {
		require.Less(t, i, 16, "the server kept the connection of a frame with a bad token open")
		msg, _, err := codec.ReadMessage(raw, 1<<20, nil)
		if err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection of a frame with a bad token open")
			break
		}
		require.NotEqual(t, codec.MethodReply, msg.ServiceMethod, "a frame with a bad token got a reply frame")
	}
	assert.Equal(t, int64(1), counter(t, p.Metrics(), "rpcxbatch.server.calls"), "the refused frame's entry ran")
}
