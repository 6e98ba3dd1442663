package batchclient_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestPlainCallOutlivesUpgrade: a call that took the plain client just
// before the server was found to have the batch plugin runs to its end on
// it, however long after ReprobePlain; the plain connection is closed once
// that call is done, as plain rpcx never closes a client under its calls.
func TestPlainCallOutlivesUpgrade(t *testing.T) {
	addr := freeAddr(t)
	plain := servePlainAt(t, addr, nil)
	c := newClient(t, batchclient.WithReprobePlain(100*time.Millisecond))
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &r))
	plain.Close()
	require.Eventually(t, func() bool { return batchclient.PlainClientBroken(c, addr) }, 5*time.Second, time.Millisecond)

	// The server turns the batch handshake away until the call below has
	// taken the plain client, so the peer stays plain until then (it asks
	// every ReprobePlain).
	var handshakes atomic.Bool
	var cc connCounter
	s := server.NewServer()
	s.AuthFunc = func(_ context.Context, req *protocol.Message, _ string) error {
		if req.ServicePath == codec.ServicePath && !handshakes.Load() {
			return errors.New("not yet")
		}
		return nil
	}
	s.Plugins.Add(&cc)
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s)
	require.NoError(t, err)
	go s.Serve("tcp", addr)
	t.Cleanup(func() { s.Close() })
	require.Eventually(t, func() bool { return s.Address() != nil }, 5*time.Second, time.Millisecond)

	// The peer is still plain: this call redials the plain client and
	// takes it (Go routes the call before it returns).
	require.True(t, c.Info(addr).Plain)
	var long testsvc.Reply
	call := c.Go(ctxT(t, 20*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 1500, B: 5}, &long, make(chan *client.Call, 1))
	handshakes.Store(true)
	require.Eventually(t, func() bool { return c.Info(addr).Status == batchclient.Connected }, 5*time.Second, time.Millisecond)
	lanes := int64(c.Info(addr).Lanes)
	// Handshakes turned away may take a moment to be counted closed.
	require.Eventually(t, func() bool { return cc.open.Load() == lanes+1 }, 5*time.Second, time.Millisecond,
		"the lanes and the plain connection: open %d, lanes %d", cc.open.Load(), lanes)
	select {
	case <-call.Done:
		t.Fatalf("the call ended before its time: %v", call.Error)
	case <-time.After(400 * time.Millisecond): // ReprobePlain is 100 ms
	}
	require.Equal(t, lanes+1, cc.open.Load(), "the plain connection is kept while the call runs")
	select {
	case <-call.Done:
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not end")
	}
	require.NoError(t, call.Error)
	require.Equal(t, 5, long.C)
	require.Eventually(t, func() bool { return cc.open.Load() == lanes }, 5*time.Second, 10*time.Millisecond,
		"open connections: %d, lanes %d", cc.open.Load(), lanes)
}
