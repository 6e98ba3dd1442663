package batchserver_test

import (
	"net"
	"reflect"
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

// server.WithWriteTimeout bounds the reply-frame writes, as it bounds each
// of rpcx's response writes: a peer that never reads its replies is
// disconnected after it. The plugin's own WithWriteTimeout still wins.
func TestServerWriteTimeoutBoundsReplyFrames(t *testing.T) {
	s := server.NewServer(server.WithWriteTimeout(200 * time.Millisecond))
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	assert.Equal(t, 200*time.Millisecond, p.Options().WriteTimeout)
	addr := serve(t, s)

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
	// The plugin's default write timeout is 10 s: well beyond this wait.
	ok := eventually(5*time.Second, func() bool { return counter(t, p.Metrics(), "rpcxbatch.server.errors.write") > 0 })
	require.True(t, ok, "the server never gave up writing to a peer that does not read")
	requireClosedByPeer(t, raw, 5*time.Second)

	s2 := server.NewServer(server.WithWriteTimeout(200 * time.Millisecond))
	p2, err := batchserver.New(s2, batchserver.WithWriteTimeout(3*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, p2.Options().WriteTimeout)
}

// keepAlivePlugin records the connections rpcx accepted.
type keepAlivePlugin struct{ conns chan net.Conn }

func (k *keepAlivePlugin) HandleConnAccept(c net.Conn) (net.Conn, bool) {
	select {
	case k.conns <- c:
	default:
	}
	return c, true
}

// keepIdle returns the TCP keep-alive idle time of an accepted connection,
// unwrapping the cmux connection rpcx serves tcp through.
func keepIdle(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		if inner := v.Elem().FieldByName("Conn"); inner.IsValid() && inner.CanInterface() {
			if ic, ok := inner.Interface().(net.Conn); ok {
				c = ic
			}
		}
	}
	tc, ok := c.(*net.TCPConn)
	require.True(t, ok, "a %T, not a TCP connection", c)
	rc, err := tc.SyscallConn()
	require.NoError(t, err)
	var idle int
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		idle, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
	}))
	require.NoError(t, serr)
	return time.Duration(idle) * time.Second
}

// server.WithTCPKeepAlivePeriod does to lanes what it does to plain rpcx
// connections where rpcx applies it: at accept, to every *net.TCPConn
// alike, here from a TCP listener served under a network name without
// rpcx's gateway. (rpcx v1.9.4 serves "tcp", "tcp4", "tcp6" and
// "reuseport" through cmux, whose connections are not *net.TCPConn: it
// applies the option to none, plain or lane, and both keep Go's 15 s.)
// The plugin has no code for the option: this guards that lanes stay
// ordinary rpcx connections here, it is not a test of plugin code.
func TestServerTCPKeepAliveOnLanes(t *testing.T) {
	s := server.NewServer(server.WithTCPKeepAlivePeriod(41 * time.Second))
	k := &keepAlivePlugin{conns: make(chan net.Conn, 16)}
	s.Plugins.Add(k)
	_, err := batchserver.New(s, batchserver.WithPoolSize(1))
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.ServeListener("direct", ln) // not "tcp": no gateway, no cmux
	}()
	t.Cleanup(func() { s.Close(); <-served })
	addr := ln.Addr().String()

	var r testsvc.Reply
	require.NoError(t, plainClient(t, addr).Call(ctxT(t, 5*time.Second), "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	c := newClient(t)
	waitConnected(t, c, addr)
	var idle []time.Duration
	for len(idle) < 2 {
		select {
		case conn := <-k.conns:
			idle = append(idle, keepIdle(t, conn))
		case <-time.After(5 * time.Second):
			t.Fatalf("accepted %d connections, want a plain one and a lane", len(idle))
		}
	}
	t.Logf("keep-alive idle: plain connection %v, lane %v", idle[0], idle[1])
	assert.Equal(t, 41*time.Second, idle[0], "rpcx applied the option to the plain connection")
	assert.Equal(t, 41*time.Second, idle[1], "rpcx applied the option to the lane")
}
