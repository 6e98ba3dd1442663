package batchclient_test

import (
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

// A new client of a server whose pool (server.WithPool) is busy with
// handlers slower than client.DefaultOption's ConnectTimeout (1 s) connects
// and gets its call answered once a worker is free, over plain rpcx and
// over rpcxbatch alike: ConnectTimeout bounds the TCP dial, as in rpcx, not
// the lane handshake, which rpcx queues on the same pool as every request.
func TestBusyPoolNewClientConnectsLikeRPCX(t *testing.T) {
	const hold = 4000 // ms each hog call holds a worker: well past ConnectTimeout
	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "batch"}[batch]
		t.Run(name, func(t *testing.T) {
			s := server.NewServer(server.WithPool(2, 100))
			_, err := batchserver.New(s)
			require.NoError(t, err)
			g := new(Gauge)
			require.NoError(t, s.RegisterName("Gauge", g, ""))
			require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
			addr, stop, err := testsvc.Serve(s)
			require.NoError(t, err)
			t.Cleanup(testsvc.StopWhenIdle(s, stop))

			// Both workers held, by a plain client (no lanes yet).
			hd, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
			require.NoError(t, err)
			hog := client.NewXClient("Gauge", client.Failfast, client.RandomSelect, hd, client.DefaultOption)
			t.Cleanup(func() { hog.Close() })
			ctx := ctxT(t, 30*time.Second)
			hogDone := make(chan error, 2)
			for i := 0; i < 2; i++ {
				go func() { hogDone <- hog.Call(ctx, "Hold", &testsvc.Args{A: hold, B: 1}, new(testsvc.Reply)) }()
			}
			t.Cleanup(func() { <-hogDone; <-hogDone })
			require.Eventually(t, func() bool { return g.now.Load() == 2 }, 10*time.Second, 5*time.Millisecond, "both workers busy")
			held := time.Now()

			d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
			require.NoError(t, err)
			var xc client.XClient
			if batch {
				xc = batchclient.NewXClient("Arith", client.Failfast, client.RandomSelect, d, client.DefaultOption)
			} else {
				xc = client.NewXClient("Arith", client.Failfast, client.RandomSelect, d, client.DefaultOption)
			}
			t.Cleanup(func() { xc.Close() })
			var r testsvc.Reply
			err = xc.Call(ctxT(t, 20*time.Second), "Mul", &testsvc.Args{A: 6, B: 7}, &r)
			t.Logf("%s: call returned %v after %v with both workers busy", name, err, time.Since(held).Round(time.Millisecond))
			require.NoError(t, err)
			assert.Equal(t, 42, r.C)
			assert.Greater(t, time.Since(held), client.DefaultOption.ConnectTimeout, "the call waited for a worker")
		})
	}
}
