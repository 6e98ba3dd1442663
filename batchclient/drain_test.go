package batchclient_test

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// drainingServer is a scripted batch server on one connection, playing a
// graceful shutdown the way it looks from the wire: it reads frames until
// it holds wantCalls calls, then sends a drain notice, reads nothing more,
// answers the first answerCalls of them (a moment later), and closes the
// connection. Calls it never answers were in frames it "never read";
// with unrun, it says that it did not run them (codec.MethodUnrun) and
// keeps the connection until the test ends.
func drainingServer(t *testing.T, wantCalls, answerCalls int, unrun bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	const inc = 0xd1a1
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(conn)
		var h protocol.Header
		h[0] = protocol.MagicNumber()
		h.SetSerializeType(protocol.SerializeNone)
		var ids []uint64
		for len(ids) < wantCalls {
			msg, _, err := codec.ReadMessage(br, 1<<20, nil)
			if err != nil {
				return
			}
			switch {
			case msg.ServiceMethod == codec.MethodHandshake:
				rh := h
				rh.SetMessageType(protocol.Response)
				rh.SetSeq(msg.Header.Seq())
				hs := codec.Handshake{Version: codec.Version, PoolSize: 1, BatchCap: 64, MaxFrameBytes: 1 << 20, Incarnation: inc, Window: 1024}
				conn.Write(codec.AppendMessage(nil, &rh, codec.ServicePath, codec.MethodHandshake, nil, codec.AppendHandshake(nil, &hs)))
			case msg.ServiceMethod == codec.MethodBatch:
				_, entries, err := codec.DecodeBatch(msg.Payload, 0)
				if err != nil {
					return
				}
				for _, e := range entries {
					ids = append(ids, e.ID)
				}
			}
		}
		h.SetMessageType(protocol.Request)
		h.SetOneway(true)
		conn.Write(codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodDrain, nil, codec.AppendDrain(nil, inc)))
		time.Sleep(300 * time.Millisecond) // handlers at work
		b := codec.AppendReplyHeader(nil, inc, answerCalls)
		for _, id := range ids[:answerCalls] {
			b = codec.AppendReply(b, &codec.Reply{ID: id, Payload: mustMsgpack(testsvc.Reply{C: int(id)})})
		}
		conn.Write(codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodReply, nil, b))
		if unrun {
			conn.Write(codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodUnrun, nil, codec.AppendUnrun(nil, inc, ids[answerCalls:])))
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
			return
		}
		time.Sleep(300 * time.Millisecond) // rpcx's Shutdown polls
	}()
	return ln.Addr().String()
}

// callDrainingServer connects a one-lane client to a drainingServer that
// answers one call of two (unrun: says it did not run the other), and
// makes the two calls; the server drains once it holds both. Their errors
// come on errs.
func callDrainingServer(t *testing.T, unrun bool) (*batchclient.Client, string, <-chan error) {
	t.Helper()
	addr := drainingServer(t, 2, 1, unrun)
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithReconnect(time.Second, time.Second))
	require.NoError(t, c.Start(addr))
	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.Connected }, 10*time.Second, 5*time.Millisecond)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			var r testsvc.Reply
			errs <- c.Call(ctxT(t, 20*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: i}, &r)
		}()
	}
	return c, addr, errs
}

func mustMsgpack(v any) []byte {
	out, err := share.Codecs[protocol.MsgPack].Encode(v)
	if err != nil {
		panic(err)
	}
	return out
}

// A lane told that its server drains: the call the server read gets its
// reply; the call in a frame the server never read fails, once the server
// closes the connection, with ErrConnection (which rpcx's Failover
// retries), not hanging and not as a ServiceError; a call made after the
// notice fails at once with ErrDraining.
func TestLaneDrain(t *testing.T) {
	c, addr, errs := callDrainingServer(t, false)
	require.Eventually(t, func() bool { return c.Info(addr).Status != batchclient.Connected }, 10*time.Second, 2*time.Millisecond,
		"the client never heard the drain notice")
	// Refused, not queued: a queued call would wait for the server to
	// close the connection and fail with ErrConnection.
	// On a loaded machine this goroutine may run only after the drained
	// lane closed and a redial failed: the peer is then down, and the call
	// is refused with ErrPeerDown, still not queued.
	var r testsvc.Reply
	err := c.Call(ctxT(t, 20*time.Second), addr, "Arith", "Mul", &testsvc.Args{}, &r)
	if !errors.Is(err, batchclient.ErrDraining) {
		require.ErrorIs(t, err, batchclient.ErrPeerDown, "neither refused as draining nor as down")
		t.Logf("the drain was over before the call: %v", err)
	}

	var ok, lost int
	for range 2 {
		err := <-errs
		var se client.ServiceError
		switch {
		case err == nil:
			ok++
		case errors.Is(err, batchclient.ErrConnection) && !errors.As(err, &se):
			lost++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 1, ok, "calls answered")
	assert.Equal(t, 1, lost, "calls failed with ErrConnection")
}

// A lane told that its server drains and did not run a call it wrote (a
// frame read too late in the server's Shutdown to run,
// codec.MethodUnrun): that call fails with ErrDraining, which rpcx's
// Failover retries, at once, not when the server closes the connection
// (this server keeps it until the test ends); the call the server ran
// gets its reply.
func TestLaneUnrunCallsFailAsDraining(t *testing.T) {
	_, _, errs := callDrainingServer(t, true)
	var ok, unrun int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, batchclient.ErrDraining):
			unrun++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 1, ok, "calls answered")
	assert.Equal(t, 1, unrun, "calls failed with ErrDraining")
}
