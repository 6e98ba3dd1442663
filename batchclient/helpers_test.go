package batchclient_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
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
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, p
}

// startServerAt serves Arith with the batch plugin at addr.
func startServerAt(t testing.TB, addr string) (*server.Server, *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	testsvc.NoJSONRPC(s)
	go s.Serve("tcp", addr)
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		require.True(t, time.Now().Before(deadline), "server at %s did not start", addr)
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// The shared test helpers, under this package's historical names.
var (
	newClient     = testenv.NewClient
	waitConnected = testenv.WaitConnected
	ctxT          = testenv.Ctx
	concurrently  = testenv.Concurrently
)
