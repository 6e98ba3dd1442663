package resmeta_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/resmeta"
)

// loopbackConn returns the client side of a real loopback connection.
func loopbackConn(t *testing.T) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	if s, ok := <-accepted; ok {
		t.Cleanup(func() { s.Close() })
	}
	return c
}

// Fill copies every key and sets share.ServerAddress, as rpcx's
// Client.Call does; without a map, metadata or a connection it writes
// nothing.
func TestFill(t *testing.T) {
	conn := loopbackConn(t)
	res := map[string]string{"a": "1", "b": "two"}

	m := map[string]string{"a": "old", "mine": "x"}
	resmeta.Fill(context.WithValue(context.Background(), share.ResMetaDataKey, m), res, conn)
	require.Equal(t, map[string]string{"a": "1", "b": "two", "mine": "x", share.ServerAddress: conn.RemoteAddr().String()}, m)

	for name, tc := range map[string]struct {
		res  map[string]string
		conn net.Conn
	}{
		"no metadata":   {res: map[string]string{}, conn: conn},
		"no connection": {res: res},
	} {
		m := map[string]string{"mine": "x"}
		resmeta.Fill(context.WithValue(context.Background(), share.ResMetaDataKey, m), tc.res, tc.conn)
		require.Equal(t, map[string]string{"mine": "x"}, m, name)
	}
	// No map in ctx: nothing to write, and no panic.
	resmeta.Fill(context.Background(), res, conn)
}

// Fill writes the map under the share.Context's lock, found also through a
// context derived from it; ShareLock finds that lock, and nil without one.
func TestFillTakesShareContextLock(t *testing.T) {
	conn := loopbackConn(t)
	require.Nil(t, resmeta.ShareLock(context.Background()))

	sc := share.NewContext(context.Background())
	m := map[string]string{}
	sc.SetValue(share.ResMetaDataKey, m)
	derived, cancel := context.WithTimeout(sc, 5*time.Second)
	defer cancel()
	mu := resmeta.ShareLock(derived)
	require.NotNil(t, mu)
	require.Same(t, mu, resmeta.ShareLock(sc))

	// The lock where share.NewContext puts it and the map above it, in
	// contexts whose Value takes no lock: only Fill's own locking can
	// hold it back here (share.Context's Value takes the lock itself).
	bare := context.WithValue(context.WithValue(context.Background(), share.ContextTagsLock, mu), share.ResMetaDataKey, m)

	for name, ctx := range map[string]context.Context{"share.Context": sc, "derived": derived, "bare": bare} {
		mu.Lock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			resmeta.Fill(ctx, map[string]string{"k": name}, conn)
		}()
		// Fill must wait for the lock: it has not written while it is held.
		select {
		case <-done:
			mu.Unlock()
			t.Fatalf("%s: Fill wrote the map without the share.Context's lock", name)
		case <-time.After(50 * time.Millisecond):
		}
		mu.Unlock()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Fill did not finish within 5s of the lock's release", name)
		}
		mu.Lock()
		require.Equal(t, name, m["k"])
		mu.Unlock()
	}
}
