package batchclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testsvc"
)

// startServer serves Arith and Echo on loopback, with the batch plugin
// unless plain is set.
func startServer(t testing.TB, plain bool, opts ...batchserver.Option) (string, *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	var p *batchserver.Plugin
	if !plain {
		var err error
		p, err = batchserver.New(s, opts...)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	return addr, p
}

func newClient(t testing.TB, opts ...batchclient.Option) *batchclient.Client {
	t.Helper()
	c, err := batchclient.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// waitConnected waits until the client's pool to addr is up.
func waitConnected(t testing.TB, c *batchclient.Client, addr string) batchclient.Info {
	t.Helper()
	require.NoError(t, c.Start(addr))
	deadline := time.Now().Add(5 * time.Second)
	for {
		in := c.Info(addr)
		if in.Status == batchclient.Connected || in.Plain {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection to %s: %+v", addr, in)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// startServerAt serves Arith with the batch plugin at addr.
func startServerAt(t testing.TB, addr string) (*server.Server, *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	go s.Serve("tcp", addr)
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		require.True(t, time.Now().Before(deadline), "server at %s did not start", addr)
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}
