package batchclient_test

import (
	"bufio"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// rawServer accepts connections on loopback and hands each to serve, which
// owns it; the listener and connections close with the test.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// silent reads and drops everything, answering nothing.
func silent(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// handshakeThenSilent answers a lane's handshake (one lane) and then
// nothing more: a peer that froze after the connection was made.
func handshakeThenSilent(c net.Conn) {
	br := bufio.NewReader(c)
	msg, _, err := codec.ReadMessage(br, 1<<20, nil)
	if err != nil || msg.ServiceMethod != codec.MethodHandshake {
		silent(c)
		return
	}
	h := msg.Header
	h.SetMessageType(protocol.Response)
	hs := codec.Handshake{Version: codec.Version, PoolSize: 1, BatchCap: 1000, MaxFrameBytes: 1 << 20, Incarnation: 1, Window: 100}
	c.Write(codec.AppendMessage(nil, &h, msg.ServicePath, msg.ServiceMethod, nil, codec.AppendHandshake(nil, &hs)))
	for {
		if _, err := br.Discard(1); err != nil {
			return
		}
	}
}

// Option.ConnectTimeout bounds the lanes' dial (DialTimeout), as rpcx's
// dial, and not the handshake, which rpcx's server may queue behind busy
// workers (TestBusyPoolNewClientConnectsLikeRPCX). A server that accepts
// and never answers the handshake is still given up, as frozen, after
// HeartbeatTimeout of silence (here 300 ms), long before the 30 s
// HandshakeTimeout: the call fails with ErrPeerDown.
func TestConnectTimeoutBoundsDialNotHandshake(t *testing.T) {
	addr := rawServer(t, silent)
	opt := client.DefaultOption
	opt.ConnectTimeout = 200 * time.Millisecond
	c := newClient(t, batchclient.FromRPCX(opt), batchclient.WithHeartbeat(100*time.Millisecond, 300*time.Millisecond))
	assert.Equal(t, 200*time.Millisecond, c.Options().DialTimeout)
	assert.Equal(t, batchclient.DefaultHandshakeTimeout, c.Options().HandshakeTimeout)
	start := time.Now()
	err := c.Call(ctxT(t, 20*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, new(testsvc.Reply))
	took := time.Since(start)
	require.ErrorIs(t, err, batchclient.ErrPeerDown)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the handshake timed out")
	assert.GreaterOrEqual(t, took, 300*time.Millisecond, "the handshake waited HeartbeatTimeout, not ConnectTimeout")
	assert.Less(t, took, batchclient.DefaultDialTimeout, "the handshake gave up at HeartbeatTimeout")
}

// pingForever reads a lane's handshake and never answers it, but sends an
// rpcx heartbeat every 50 ms: a server whose pool never frees a worker.
func pingForever(c net.Conn) {
	go silent(c)
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetOneway(true)
	h.SetHeartbeat(true)
	ping := codec.AppendMessage(nil, &h, "", "", nil, nil)
	for {
		time.Sleep(50 * time.Millisecond)
		if _, err := c.Write(ping); err != nil {
			return
		}
	}
}

// Heartbeats keep a handshake waiting, but HandshakeTimeout bounds it:
// a server that shows signs of life and never answers is given up.
func TestHandshakeTimeoutBoundsAHeardHandshake(t *testing.T) {
	addr := rawServer(t, pingForever)
	c := newClient(t, batchclient.WithHeartbeat(100*time.Millisecond, 300*time.Millisecond),
		batchclient.WithHandshakeTimeout(time.Second))
	start := time.Now()
	err := c.Call(ctxT(t, 20*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, new(testsvc.Reply))
	took := time.Since(start)
	require.ErrorIs(t, err, batchclient.ErrPeerDown)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the handshake timed out")
	assert.GreaterOrEqual(t, took, time.Second, "heartbeats kept the handshake waiting past HeartbeatTimeout")
	assert.Less(t, took, 10*time.Second, "the handshake gave up at HandshakeTimeout")
}

// Option.Heartbeat, HeartbeatInterval and MaxWaitForHeartbeat tune the
// lanes' heartbeat: a peer frozen after the handshake fails a waiting call
// after HeartbeatInterval + MaxWaitForHeartbeat of silence (here 150 ms),
// as rpcx's client closes a connection whose heartbeat got no answer
// within MaxWaitForHeartbeat; both long before the lanes' default of 2 s.
// (rpcx's own client is not run alongside here: its heartbeat goroutine
// races with its send when the heartbeat's context ends, which the race
// detector reports; run against this peer it failed its call with
// ErrShutdown after 155-170 ms.)
func TestRPCXHeartbeatTunesLanes(t *testing.T) {
	opt := client.DefaultOption
	opt.Heartbeat = true
	opt.HeartbeatInterval = 50 * time.Millisecond
	opt.MaxWaitForHeartbeat = 100 * time.Millisecond

	addr := rawServer(t, handshakeThenSilent)
	c := newClient(t, batchclient.FromRPCX(opt))
	o := c.Options()
	assert.Equal(t, 50*time.Millisecond, o.HeartbeatInterval)
	assert.Equal(t, 150*time.Millisecond, o.HeartbeatTimeout)
	waitConnected(t, c, addr)
	start := time.Now()
	err := c.Call(ctxT(t, 20*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, new(testsvc.Reply))
	took := time.Since(start)
	require.ErrorIs(t, err, batchclient.ErrHeartbeat)
	t.Logf("frozen peer detected after %v", took)
	assert.Less(t, took, batchclient.DefaultHeartbeatTimeout)
}

// Without Option.Heartbeat the lanes keep their own heartbeat (rpcx then
// sends none, but lanes need theirs to tell a frozen peer).
func TestRPCXWithoutHeartbeatKeepsLaneDefaults(t *testing.T) {
	c := newClient(t, batchclient.FromRPCX(client.DefaultOption))
	o := c.Options()
	assert.Equal(t, batchclient.DefaultHeartbeatInterval, o.HeartbeatInterval)
	assert.Equal(t, batchclient.DefaultHeartbeatTimeout, o.HeartbeatTimeout)
}

// acceptCounter counts the connections a listener accepted.
type acceptCounter struct {
	net.Listener
	n atomic.Int64
}

func (l *acceptCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// server.WithReadTimeout shorter than the lanes' heartbeat interval does
// not cut a healthy idle lane: the handshake tells the lane the timeout,
// and it writes a heartbeat well within it. The lanes connected first stay
// the only connections through an idle spell of several timeouts.
func TestReadTimeoutNeverCutsIdleLane(t *testing.T) {
	s := server.NewServer(server.WithReadTimeout(300 * time.Millisecond))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s, batchserver.WithPoolSize(2))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	al := &acceptCounter{Listener: ln}
	go s.ServeListener("tcp", al)
	t.Cleanup(func() { s.Close() })
	addr := ln.Addr().String()

	// Heartbeat interval 500 ms: above the read timeout. Two fixed lanes,
	// so that an idle lane is cut only if the read timeout cuts it.
	c := newClient(t, batchclient.WithLanes(2))
	waitConnected(t, c, addr)
	call := func() {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
		require.Equal(t, 42, r.C)
	}
	call()
	require.Equal(t, int64(2), al.n.Load())
	// The idle spell is the scenario under test, not a synchronisation.
	time.Sleep(1500 * time.Millisecond)
	call()
	assert.Equal(t, int64(2), al.n.Load(), "a lane was cut and reconnected")
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
}
