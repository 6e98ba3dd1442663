package batchserver_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// dialSmallWindow dials addr with a small receive buffer, so that what the
// server writes while the client does not read stays in the server's
// socket, written but not yet taken by the client's kernel.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 3 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// echoCalls returns n calls of Echo.Bytes, each with size bytes, ids from
// first on.
func echoCalls(n, size int, first uint64) []codec.Entry {
	payload := mustMsgpack(make([]byte, size))
	es := make([]codec.Entry, n)
	for i := range es {
		es[i] = codec.Entry{Kind: codec.KindCall, ID: first + uint64(i), ServicePath: "Echo", ServiceMethod: "Bytes",
			SerializeType: uint8(protocol.MsgPack), Payload: payload}
	}
	return es
}

// plainRequest is a plain rpcx request to path.method with a msgpack
// payload, as rpcx's client writes it.
func plainRequest(seq uint64, path, method string, payload []byte) []byte {
	h := reqHeader(false)
	h.SetSerializeType(protocol.MsgPack)
	h.SetSeq(seq)
	return codec.AppendMessage(nil, h, path, method, nil, payload)
}

// TestShutdownLetsTheClientTakeItsReplies: replies the server has written
// reach a client that reads them slowly, even though the client wrote
// more than the server read before Shutdown closed the connection. Linux
// answers the close of a socket with unread input with a reset, and drops
// what the socket still held of its output: a reply written into the
// socket (Write returned) but not yet taken by the client's kernel, whose
// window was full, was lost, and the client saw "connection reset by
// peer" with the call's handler run (TestRollingRestart: a Shutdown of
// 9 ms, 35 calls run twice under -race on a busy machine). The drain now
// counts a connection as flushed once its peer has taken what was written
// (the socket's unacknowledged output), for at most the write timeout.
//
// The client here reads nothing for 300 ms after Shutdown begins, and
// rpcx's read loop is held (AuthFunc) on a plain request the client wrote
// after the frame, so that what the client writes next stays unread.
// Plain rpcx loses the responses of pipelined requests the same way; its
// outcome is logged beside, not asserted.
// unackedShutdown is the scenario of TestShutdownLetsTheClientTakeItsReplies:
// calls answered into a socket whose client does not read, more input
// left unread, and a Shutdown; the client reads from readAfter on (never
// when negative). It returns the answers the client got, why it stopped
// reading, and how long Shutdown took.
func unackedShutdown(t *testing.T, batch bool, calls, size int, readAfter time.Duration, opts ...batchserver.Option) (answered int, readErr error, took time.Duration) {
	gate := newReadGate("Arith", "Mul")
	var s *server.Server
	var replyFrames func() int64
	if batch {
		var pl *batchserver.Plugin
		s, pl = newServer(t, opts...)
		replyFrames = func() int64 { return counter(t, pl.Metrics(), "rpcxbatch.server.reply_frames") }
	} else {
		s = server.NewServer()
		require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
		require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	}
	s.AuthFunc = gate.auth
	addr := serve(t, s)
	c := dialSmallWindow(t, addr)
	ids := make(map[uint64]bool)
	if batch {
		rawHandshake(t, c)
		rawWrite(t, c, batchMessage(frame(1, echoCalls(calls, size, 1)...)))
		for i := range calls {
			ids[uint64(1+i)] = true
		}
		require.True(t, eventually(5*time.Second, func() bool { return replyFrames() > 0 }), "no reply frame written")
	} else {
		payload := mustMsgpack(make([]byte, size))
		for i := range calls {
			rawWrite(t, c, plainRequest(uint64(1+i), "Echo", "Bytes", payload))
			ids[uint64(1+i)] = true
		}
	}
	// Written into the server's socket, most of it not yet taken by the
	// client, which does not read.
	time.Sleep(100 * time.Millisecond)
	gate.armed.Store(true)
	rawWrite(t, c, plainRequest(100, "Arith", "Mul", mustMsgpack(&testsvc.Args{A: 2, B: 3})))
	select {
	case <-gate.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the plain request never reached AuthFunc")
	}
	// rpcx's read loop is held: this stays unread in the server's socket.
	if batch {
		rawWrite(t, c, batchMessage(frame(2, sleepCalls(1, 1, 50)...)))
	} else {
		rawWrite(t, c, plainRequest(50, "Arith", "Mul", mustMsgpack(&testsvc.Args{A: 1, B: 1})))
	}
	time.Sleep(20 * time.Millisecond)

	done := make(chan time.Duration, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		assert.NoError(t, s.Shutdown(ctx))
		done <- time.Since(start)
	}()
	if readAfter < 0 {
		took = <-done
		close(gate.release)
		return 0, nil, took
	}
	time.Sleep(readAfter)
	answered, readErr = countAnswers(c, ids, 10*time.Second)
	close(gate.release)
	return answered, readErr, <-done
}

// TestShutdownLetsTheClientTakeItsReplies: replies the server has written
// reach a client that reads them slowly, even though the client wrote
// more than the server read before Shutdown closed the connection. Linux
// answers the close of a socket with unread input with a reset, and drops
// what the socket still held of its output: a reply written into the
// socket (Write returned) but not yet taken by the client's kernel, whose
// window was full, was lost, and the client saw "connection reset by
// peer" with the call's handler run (TestRollingRestart: a Shutdown of
// 9 ms, 35 calls run twice under -race on a busy machine). The drain now
// counts a connection as flushed once its peer has taken what was written
// (the socket's unacknowledged output), for at most the write timeout.
//
// The client here reads nothing for 300 ms after Shutdown begins, and
// rpcx's read loop is held (AuthFunc) on a plain request the client wrote
// after the frame, so that what the client writes next stays unread.
// Plain rpcx loses the responses of pipelined requests the same way; its
// outcome is logged beside, not asserted.
func TestShutdownLetsTheClientTakeItsReplies(t *testing.T) {
	const calls, size = 6, 2000
	plainN, plainErr, plainTook := unackedShutdown(t, false, calls, size, 300*time.Millisecond)
	batchN, batchErr, batchTook := unackedShutdown(t, true, calls, size, 300*time.Millisecond)
	t.Logf("plain rpcx: %d of %d responses (%v), Shutdown took %v", plainN, calls, plainErr, plainTook.Round(time.Millisecond))
	t.Logf("batch:      %d of %d replies (%v), Shutdown took %v", batchN, calls, batchErr, batchTook.Round(time.Millisecond))
	assert.Equal(t, calls, batchN, "replies written before Shutdown lost: %v", batchErr)
}

// TestShutdownWaitsForASilentClientNoLongerThanTheWriteTimeout: a client
// that never takes its replies holds Shutdown no longer than the server's
// write timeout (500 ms here) and rpcx's poll, never until Shutdown's
// context ends: the bound is the server's timer, not what the client does.
func TestShutdownWaitsForASilentClientNoLongerThanTheWriteTimeout(t *testing.T) {
	_, _, took := unackedShutdown(t, true, 6, 2000, -1, batchserver.WithWriteTimeout(500*time.Millisecond))
	t.Logf("Shutdown took %v", took.Round(time.Millisecond))
	assert.Less(t, took, 5*time.Second, "Shutdown waited for a client that does not read")
}
