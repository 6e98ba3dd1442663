package batchclient_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestPlainFallbackUsesTheApplicationsConnFactory: rpcx's Connect uses an application's ConnFactories["tcp"]; so must the
// plain fallback (drop-in).
func TestPlainFallbackUsesTheApplicationsConnFactory(t *testing.T) {
	var used atomic.Int64
	client.ConnFactories["tcp"] = func(c *client.Client, network, addr string) (net.Conn, error) {
		used.Add(1)
		return net.DialTimeout(network, addr, 5*time.Second)
	}
	defer delete(client.ConnFactories, "tcp")
	addr, _ := startServer(t, true)
	c := newClient(t)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.NotZero(t, used.Load(), "the plain fallback bypassed the application's tcp ConnFactory")
}
