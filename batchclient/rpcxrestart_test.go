package batchclient_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Issue 34, item 5: a quick restart at the same address. The server shuts
// down gracefully and at once serves again on the same address; Failtry
// calls made throughout all succeed on plain rpcx, whose retries dial
// again and find the new listener. On the drop-in a retry gets a fresh
// connect attempt too (or waits for the one under way), never the failure
// of an attempt made in the gap between the two listeners.
func TestQuickRestartFailtryRetriesAsOnPlain(t *testing.T) {
	for _, sm := range []client.SelectMode{client.RoundRobin, client.RandomSelect} {
		t.Run(sm.String(), func(t *testing.T) { quickRestartFailtry(t, sm) })
	}
}

// quickRestartFailtry is TestQuickRestartFailtryRetriesAsOnPlain under
// select mode sm: RandomSelect is the drop-in's own choice, which keeps
// the connection the last call found (choice.rc) and must let go of it
// once it is closed.
func quickRestartFailtry(t *testing.T, sm client.SelectMode) {
	const restarts = 4
	failures := func(mk func(client.ServiceDiscovery) client.XClient) []string {
		addr := freeAddr(t)
		s, _ := startServerAt(t, addr)
		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		xc := mk(d)
		t.Cleanup(func() { xc.Close() })
		var failed []string
		calls := func(n int) {
			for i := range n {
				var r testsvc.Reply
				if err := xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: i, B: 2}, &r); err != nil {
					failed = append(failed, err.Error())
				}
			}
		}
		calls(5)
		for range restarts {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			require.NoError(t, s.Shutdown(ctx))
			cancel()
			s, _ = startServerAt(t, addr)
			calls(10)
		}
		return failed
	}
	plain := failures(func(d client.ServiceDiscovery) client.XClient {
		return client.NewXClient("Arith", client.Failtry, sm, d, client.DefaultOption)
	})
	batch := failures(func(d client.ServiceDiscovery) client.XClient {
		return batchclient.NewXClient("Arith", client.Failtry, sm, d, client.DefaultOption)
	})
	require.Empty(t, plain, "plain rpcx")
	assert.Empty(t, batch, "drop-in: %s", fmt.Sprint(batch))
}
