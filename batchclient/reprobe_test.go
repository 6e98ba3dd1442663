package batchclient_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// connCounter counts the connections a server accepts and has open.
type connCounter struct{ accepted, open atomic.Int64 }

func (c *connCounter) HandleConnAccept(conn net.Conn) (net.Conn, bool) {
	c.accepted.Add(1)
	c.open.Add(1)
	return conn, true
}

func (c *connCounter) HandleConnClose(net.Conn) bool {
	c.open.Add(-1)
	return true
}

// freeAddr returns a loopback address nothing listens on, for a server
// that is to be started, stopped and started again at the same address.
func freeAddr(t *testing.T) string {
	t.Helper()
	return testenv.RestartAddr(t)
}

// servePlainAt serves Arith with plain rpcx (no batch plugin) at addr; its
// connections are counted in cc when it is not nil.
func servePlainAt(t *testing.T, addr string, cc *connCounter) *server.Server {
	t.Helper()
	s := server.NewServer()
	if cc != nil {
		s.Plugins.Add(cc)
	}
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	go s.Serve("tcp", addr)
	require.Eventually(t, func() bool { return s.Address() != nil }, 5*time.Second, time.Millisecond)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPlainServerUpgradedToBatch: a rolling upgrade. A server without the
// batch plugin is served over plain rpcx; restarted at the same address
// with the plugin, it is asked again and served by lanes, without the
// client being restarted.
func TestPlainServerUpgradedToBatch(t *testing.T) {
	addr := freeAddr(t)

	plain := servePlainAt(t, addr, nil)
	c := newClient(t, batchclient.WithReprobePlain(time.Hour)) // only the broken connection asks again
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	assert.Equal(t, 6, r.C)
	require.True(t, c.Info(addr).Plain)

	plain.Close()
	require.Eventually(t, func() bool { return batchclient.PlainClientBroken(c, addr) }, 5*time.Second, time.Millisecond)
	_, p := startServerAt(t, addr)
	// Calls go on (the first may meet the restart); the broken plain
	// connection has the client ask the server again.
	require.Eventually(t, func() bool {
		c.Call(ctxT(t, time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r)
		return c.Info(addr).Status == batchclient.Connected
	}, 10*time.Second, 20*time.Millisecond, "info: %+v", c.Info(addr))
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 5}, &r))
	assert.Equal(t, 20, r.C)
	assert.Positive(t, p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 }).Count(), "calls over lanes")
	assert.False(t, c.Info(addr).Plain)
}

// TestPlainServerAskedAgain: a server without the plugin is asked again
// every ReprobePlain (each time on a connection of its own) and stays on
// plain rpcx, counted as one fallback.
func TestPlainServerAskedAgain(t *testing.T) {
	addr := freeAddr(t)
	var cc connCounter
	servePlainAt(t, addr, &cc)
	c := newClient(t, batchclient.WithReprobePlain(20*time.Millisecond))
	var r testsvc.Reply
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 3}, &r))
		assert.Equal(t, 9, r.C)
		time.Sleep(10 * time.Millisecond)
	}
	assert.True(t, c.Info(addr).Plain)
	assert.Equal(t, int64(1), c.Metrics().Get("rpcxbatch.client.fallbacks").(interface{ Count() int64 }).Count())
	// The first handshake, the plain connection, and a handshake every
	// 20 ms for 300 ms (the scheduler may stretch the timer on a loaded
	// machine, hence the margin).
	assert.GreaterOrEqual(t, cc.accepted.Load(), int64(2+5), "connections accepted")
}

// TestPlainConnectionClosedAfterUpgrade: once a server that was plain is
// served by lanes, the client's plain connection to it is closed
// ReprobePlain later; only the lanes stay open.
func TestPlainConnectionClosedAfterUpgrade(t *testing.T) {
	addr := freeAddr(t)
	plain := servePlainAt(t, addr, nil)
	c := newClient(t, batchclient.WithReprobePlain(300*time.Millisecond))
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &r))
	plain.Close()
	require.Eventually(t, func() bool { return batchclient.PlainClientBroken(c, addr) }, 5*time.Second, time.Millisecond)

	var cc connCounter
	s := server.NewServer()
	s.Plugins.Add(&cc)
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s)
	require.NoError(t, err)
	go s.Serve("tcp", addr)
	t.Cleanup(func() { s.Close() })
	require.Eventually(t, func() bool { return s.Address() != nil }, 5*time.Second, time.Millisecond)
	// The first call after the restart reconnects the plain client to the
	// new server, and the broken connection has the client ask again.
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &r))
	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.Connected }, 5*time.Second, 10*time.Millisecond)
	lanes := int64(c.Info(addr).Lanes)
	require.Equal(t, lanes+1, cc.open.Load(), "the lanes and the plain connection")
	require.Eventually(t, func() bool { return cc.open.Load() == lanes }, 5*time.Second, 10*time.Millisecond,
		"open connections: %d, lanes %d", cc.open.Load(), lanes)
}

// TestUnusedPlainServerForgotten: a server without the plugin stays known
// while calls use it; once none has for ForgetDown, the client forgets it
// (no more handshakes every ReprobePlain) and closes its plain connection.
// A later call starts afresh.
func TestUnusedPlainServerForgotten(t *testing.T) {
	addr := freeAddr(t)
	var cc connCounter
	servePlainAt(t, addr, &cc)
	c := newClient(t, batchclient.WithReprobePlain(30*time.Millisecond), batchclient.WithForgetDown(150*time.Millisecond))
	var r testsvc.Reply
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 4}, &r))
		assert.Equal(t, 8, r.C)
		require.True(t, c.Info(addr).Plain, "a plain server in use stays known")
		time.Sleep(20 * time.Millisecond)
	}

	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.NotConnected }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return cc.open.Load() == 0 }, 5*time.Second, 10*time.Millisecond,
		"open connections: %d", cc.open.Load())
	accepted := cc.accepted.Load()
	time.Sleep(150 * time.Millisecond)
	assert.Equal(t, accepted, cc.accepted.Load(), "a forgotten server is not asked again")

	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 3, B: 4}, &r))
	assert.Equal(t, 12, r.C)
	assert.True(t, c.Info(addr).Plain)
}

// TestLongPlainCallOutlivesForgetDown: a call still running on a plain
// server's connection keeps the server known, however long it runs; only
// an idle plain server is forgotten.
func TestLongPlainCallOutlivesForgetDown(t *testing.T) {
	addr := freeAddr(t)
	servePlainAt(t, addr, nil)
	c := newClient(t, batchclient.WithReprobePlain(30*time.Millisecond), batchclient.WithForgetDown(60*time.Millisecond))
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 600, B: 7}, &r))
	assert.Equal(t, 7, r.C)
	done := make(chan *client.Call, 1)
	call := <-c.Go(ctxT(t, 5*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 400, B: 8}, &r, done).Done
	require.NoError(t, call.Error)
	assert.Equal(t, 8, r.C)
	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.NotConnected }, 5*time.Second, 10*time.Millisecond)
}

// TestSendRawKeepsPlainServerKnown: XClient.SendRaw goes over the plain
// client, and counts as use like any call: a plain server used only
// through it stays known, and a long SendRaw is not cut off.
func TestSendRawKeepsPlainServerKnown(t *testing.T) {
	addr := freeAddr(t)
	servePlainAt(t, addr, nil)
	bc := newClient(t, batchclient.WithReprobePlain(30*time.Millisecond), batchclient.WithForgetDown(100*time.Millisecond))
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	xc := batchclient.NewXClientWith(bc, "Arith", client.Failfast, client.RandomSelect, d, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })
	var seq atomic.Uint64
	raw := func(method string, args *testsvc.Args) error {
		m := protocol.NewMessage()
		m.SetMessageType(protocol.Request)
		m.SetSerializeType(protocol.MsgPack)
		m.ServicePath, m.ServiceMethod = "Arith", method
		m.Payload, _ = msgpack.Marshal(args)
		m.SetSeq(seq.Add(1))
		_, _, err := xc.SendRaw(ctxT(t, 5*time.Second), m)
		return err
	}
	require.NoError(t, raw("Mul", &testsvc.Args{A: 2, B: 3}))
	require.Eventually(t, func() bool { return bc.Info(addr).Plain }, 5*time.Second, time.Millisecond)
	for range 30 {
		require.NoError(t, raw("Mul", &testsvc.Args{A: 2, B: 3}))
		require.True(t, bc.Info(addr).Plain)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, raw("Sleep", &testsvc.Args{A: 400, B: 1}), "a long SendRaw")
}
