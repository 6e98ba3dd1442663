package reliability_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The shared test helpers.
var (
	newClient = testenv.NewClient
	ctxT      = testenv.Ctx
)

// serve starts s with the batch plugin on loopback; register adds services.
func serve(t testing.TB, s *server.Server, register func(*server.Server, *batchserver.Plugin), opts ...batchserver.Option) (string, *batchserver.Plugin) {
	t.Helper()
	p, err := batchserver.New(s, opts...)
	require.NoError(t, err)
	if register != nil {
		register(s, p)
	}
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	return addr, p
}

// connect starts the client's pool to addr and waits until it is up.
func connect(t testing.TB, c *batchclient.Client, addr string) batchclient.Info {
	t.Helper()
	require.NoError(t, c.Start(addr))
	deadline := time.Now().Add(10 * time.Second)
	for {
		in := c.Info(addr)
		if in.Status == batchclient.Connected {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pool to %s: %+v", addr, in)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
