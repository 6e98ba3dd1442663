package batchclient_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Issue 34, item 3: client.Option.GenBreaker. rpcx makes one breaker per
// server and feeds it a failure each time it cannot connect; once it is
// open, calls fail at once with client.ErrBreakerOpen, until its window
// has passed and a connect succeeds again. The connect hooks run as
// often: ConnCreateFailed for each failed connect, ConnCreated once.
func TestGenBreakerOpensAndClosesAsOnPlain(t *testing.T) {
	const threshold, window = 3, 300 * time.Millisecond
	option := client.DefaultOption
	option.GenBreaker = func() client.Breaker { return client.NewConsecCircuitBreaker(threshold, window) }

	// outcomes makes calls to a dead server, threshold+2 of them, then
	// brings the server up, waits out the window and calls again.
	outcomes := func(mk func(client.ServiceDiscovery) client.XClient) []string {
		addr := freeAddr(t)
		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		xc := mk(d)
		t.Cleanup(func() { xc.Close() })
		h := &hookRecorder{only: map[string]bool{"ConnCreated": true, "ConnCreateFailed": true}}
		xc.GetPlugins().Add(h)
		var out []string
		call := func() {
			var r testsvc.Reply
			err := xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: 2, B: 3}, &r)
			switch {
			case err == nil:
				out = append(out, "ok")
			case errors.Is(err, client.ErrBreakerOpen):
				out = append(out, "open")
			default:
				out = append(out, "failed")
			}
		}
		for range threshold + 2 {
			call()
		}
		startServerAt(t, addr)
		call() // still open: the window has not passed
		time.Sleep(window + 100*time.Millisecond)
		call()
		call()
		for _, e := range h.list() {
			out = append(out, strings.ReplaceAll(e, addr, "ADDR"))
		}
		return out
	}
	plain := outcomes(func(d client.ServiceDiscovery) client.XClient {
		return client.NewXClient("Arith", client.Failfast, client.RoundRobin, d, option)
	})
	batch := outcomes(func(d client.ServiceDiscovery) client.XClient {
		return batchclient.NewXClient("Arith", client.Failfast, client.RoundRobin, d, option, batchclient.WithLanes(1))
	})
	assert.Equal(t, []string{"failed", "failed", "failed", "open", "open", "open", "ok", "ok",
		"ConnCreateFailed tcp ADDR", "ConnCreateFailed tcp ADDR", "ConnCreateFailed tcp ADDR", "ConnCreated ADDR"}, plain, "plain rpcx")
	assert.Equal(t, plain, batch, "drop-in")
}
