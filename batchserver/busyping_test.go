package batchserver_test

import (
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// One lane whose client stopped reading, with a reply frame stuck in its
// socket, must not keep the server's heartbeats from the other lanes: with
// every worker of the pool held by handlers slower than their heartbeat
// timeout, healthy lanes hear only those heartbeats, and their calls
// complete, as a plain rpcx client's do.
func TestBusyPingSkipsAStuckLane(t *testing.T) {
	s := server.NewServer(server.WithPool(2, 100))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s, batchserver.WithWriteTimeout(10*time.Second))
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	addr := serve(t, s)

	// The stuck lane: a reply far larger than the socket buffers, never
	// read, blocks its writer for the write timeout.
	stuck := rawDial(t, addr)
	require.NoError(t, stuck.(*net.TCPConn).SetReadBuffer(4096))
	rawHandshake(t, stuck)
	grow := codec.Entry{Kind: codec.KindCall, ID: 1, ServicePath: "Echo", ServiceMethod: "Grow",
		SerializeType: uint8(protocol.MsgPack), Payload: mustMsgpack(12 << 20)}
	rawWrite(t, stuck, batchMessage(frame(1, grow)))
	// The reply is being written (its first bytes arrived), and stays
	// stuck: nothing more is read from this connection.
	require.NoError(t, stuck.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = stuck.Read(make([]byte, 1))
	require.NoError(t, err)

	// Healthy lanes that give a silent server up after 1 s, and a plain
	// client for comparison, each with a call held by a worker for 3 s.
	c := newClient(t, batchclient.WithHeartbeat(100*time.Millisecond, time.Second), batchclient.WithLanes(2))
	waitConnected(t, c, addr)
	pc := plainClient(t, addr)
	ctx := ctxT(t, 30*time.Second)
	held := time.Now()
	plainDone := make(chan error, 1)
	go func() {
		var r testsvc.Reply
		plainDone <- pc.Call(ctx, "Arith", "Sleep", &testsvc.Args{A: 3000, B: 7}, &r)
	}()
	var r testsvc.Reply
	err = c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 3000, B: 9}, &r)
	t.Logf("batch call returned %v after %v", err, time.Since(held).Round(time.Millisecond))
	require.NoError(t, err, "a healthy lane gave up the busy server")
	assert.Equal(t, 9, r.C)
	require.NoError(t, <-plainDone)
}
