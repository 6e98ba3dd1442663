package batchclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The drop-in XClient keeps its selection off a server that is draining,
// and SetPlugins keeps that: the plugin is added to the container the
// caller passes (as the README says). Two servers, one of them shutting
// down with a call in flight; Failtry calls over RoundRobin all reach the
// other server, with the XClient's own plugins and after SetPlugins with
// an empty container. Were the plugin lost, Failtry would retry the
// draining server and half the calls would fail with ErrDraining.
func TestSetPluginsKeepsSkippingDrainingServers(t *testing.T) {
	for _, setPlugins := range []bool{false, true} {
		name := map[bool]string{false: "own plugins", true: "after SetPlugins"}[setPlugins]
		draining, drainingSrv := serveArith(t)
		healthy, _ := serveArith(t)

		bc := newClient(t)
		pairs := []*client.KVPair{{Key: "tcp@" + draining}, {Key: "tcp@" + healthy}}
		d, err := client.NewMultipleServersDiscovery(pairs)
		require.NoError(t, err)
		xc := batchclient.NewXClientWith(bc, "Arith", client.Failtry, client.RoundRobin, d, client.DefaultOption)
		t.Cleanup(func() { xc.Close() })
		if setPlugins {
			xc.SetPlugins(client.NewPluginContainer())
		}
		for i := range 4 { // both servers connected
			var r testsvc.Reply
			require.NoError(t, xc.Call(ctxT(t, 10*time.Second), "Mul", &testsvc.Args{A: i, B: 2}, &r), name)
		}

		// A call in flight keeps the draining server draining while the
		// test runs: Shutdown waits for it.
		holder := newClient(t)
		held := make(chan error, 1)
		go func() {
			var r testsvc.Reply
			held <- holder.Call(ctxT(t, 20*time.Second), draining, "Arith", "Sleep", &testsvc.Args{A: 1500}, &r)
		}()
		require.Equal(t, batchclient.Connected, waitConnected(t, holder, draining).Status, name)
		time.Sleep(100 * time.Millisecond) // the Sleep call reaches its handler
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- drainingSrv.Shutdown(ctx)
		}()
		require.Eventually(t, func() bool { return bc.Info(draining).Status != batchclient.Connected },
			10*time.Second, 5*time.Millisecond, "%s: the XClient's Client never heard the drain notice", name)

		const n = 20
		failed := 0
		for i := range n {
			var r testsvc.Reply
			if err := xc.Call(ctxT(t, 10*time.Second), "Mul", &testsvc.Args{A: i, B: 3}, &r); err != nil {
				failed++
				t.Logf("%s: call %d: %v", name, i, err)
				continue
			}
			assert.Equal(t, 3*i, r.C, name)
		}
		assert.Zero(t, failed, "%s: calls sent to the draining server", name)
		require.NoError(t, <-held, name)
		require.NoError(t, <-shut, name)
	}
}

// serveArith serves Arith with the batch plugin on loopback and returns
// its address and server (for Shutdown).
func serveArith(t *testing.T) (string, *server.Server) {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	_, err := batchserver.New(s)
	require.NoError(t, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, s
}
