package batchclient_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Issue 34, item 7: a user's selector sees the servers' keys as rpcx
// gives them, and its choice still rides the lanes.

// tcpOnlySelector keeps to the "tcp@" servers, as a selector that knows
// rpcx's keys does; it records the keys it was given.
type tcpOnlySelector struct {
	mu   sync.Mutex
	keys []string
}

func (s *tcpOnlySelector) Select(context.Context, string, string, any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if strings.HasPrefix(k, "tcp@") {
			return k
		}
	}
	return ""
}

func (s *tcpOnlySelector) UpdateServer(servers map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = s.keys[:0]
	for k := range servers {
		s.keys = append(s.keys, k)
	}
	sort.Strings(s.keys)
}

func (s *tcpOnlySelector) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// keyPlugin is a WrapSelect plugin that records the keys it sees chosen.
type keyPlugin struct {
	mu   sync.Mutex
	keys []string
}

func (p *keyPlugin) WrapSelect(next client.SelectFunc) client.SelectFunc {
	return func(ctx context.Context, servicePath, serviceMethod string, args any) string {
		k := next(ctx, servicePath, serviceMethod, args)
		p.mu.Lock()
		p.keys = append(p.keys, k)
		p.mu.Unlock()
		return k
	}
}

func TestUserSelectorSeesRPCXKeysAndRidesLanes(t *testing.T) {
	addr, p := startServer(t, false)
	run := func(xc client.XClient) ([]string, []string) {
		sel, kp := &tcpOnlySelector{}, &keyPlugin{}
		xc.SetSelector(sel)
		xc.GetPlugins().Add(kp)
		for i := range 3 {
			var r testsvc.Reply
			require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: i, B: 2}, &r))
			require.Equal(t, 2*i, r.C)
		}
		return sel.seen(), kp.keys
	}
	d, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + addr}})
	require.NoError(t, err)
	plainXC := client.NewXClient("Arith", client.Failtry, client.SelectByUser, d, client.DefaultOption)
	t.Cleanup(func() { plainXC.Close() })
	plainKeys, plainChosen := run(plainXC)

	bc := newClient(t)
	d2, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + addr}})
	require.NoError(t, err)
	xc := batchclient.NewXClientWith(bc, "Arith", client.Failtry, client.SelectByUser, d2, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })
	before := counter(t, p, "rpcxbatch.server.calls")
	keys, chosen := run(xc)

	assert.Equal(t, []string{"tcp@" + addr}, plainKeys)
	assert.Equal(t, plainKeys, keys, "the selector's servers")
	assert.Equal(t, plainChosen, chosen, "the keys WrapSelect plugins see")
	assert.Equal(t, batchclient.Connected, bc.Info(addr).Status)
	assert.Equal(t, before+3, counter(t, p, "rpcxbatch.server.calls"), "the selector's choice rides the lanes")

	// Inform's receipts name the servers by the same keys.
	inform := func(xc client.XClient) []string {
		rs, err := xc.Inform(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: 1, B: 1}, &testsvc.Reply{})
		require.NoError(t, err)
		var out []string
		for _, r := range rs {
			out = append(out, r.Address)
		}
		return out
	}
	assert.Equal(t, inform(plainXC), inform(xc), "Inform's receipts")
}
