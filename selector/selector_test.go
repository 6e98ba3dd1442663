package selector_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
	"github.com/rpcxbatch/rpcxbatch/selector"
)

func TestMain(m *testing.M) {
	log.SetDummyLogger() // rpcx logs every connection close
	os.Exit(m.Run())
}

var servers = map[string]string{"tcp@127.0.0.1:1": "", "tcp@127.0.0.1:2": "", "tcp@127.0.0.1:3": "", "tcp@127.0.0.1:4": ""}

func TestLocalFirstPrefersLocal(t *testing.T) {
	s := selector.NewLocalFirst("127.0.0.1:3")
	require.Equal(t, "", s.Select(context.Background(), "S", "M", nil), "no servers yet")
	s.UpdateServer(servers)
	for i := 0; i < 20; i++ {
		require.Equal(t, "tcp@127.0.0.1:3", s.Select(context.Background(), "S", "M", nil))
	}
	// Local not among the servers: random ones.
	s2 := selector.NewLocalFirst("127.0.0.1:9")
	s2.UpdateServer(servers)
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		seen[s2.Select(context.Background(), "S", "M", nil)] = true
	}
	require.Len(t, seen, 4)
}

// In a tracked context, the attempts of one call go to the local server
// first and then to each other server once, in random order.
func TestLocalFirstTrackedAttempts(t *testing.T) {
	s := selector.NewLocalFirst("tcp@127.0.0.1:2")
	s.UpdateServer(servers)
	ctx := selector.Track(context.Background())
	got := []string{}
	for i := 0; i < 4; i++ {
		got = append(got, s.Select(ctx, "S", "M", nil))
	}
	require.Equal(t, "tcp@127.0.0.1:2", got[0])
	require.ElementsMatch(t, []string{"tcp@127.0.0.1:1", "tcp@127.0.0.1:2", "tcp@127.0.0.1:3", "tcp@127.0.0.1:4"}, got)
}

func TestRandomOrderRounds(t *testing.T) {
	s := selector.NewRandomOrder()
	require.Equal(t, "", s.Select(context.Background(), "S", "M", nil))
	s.UpdateServer(servers)
	firsts := map[string]bool{}
	for round := 0; round < 50; round++ {
		got := map[string]bool{}
		for i := 0; i < 4; i++ {
			k := s.Select(context.Background(), "S", "M", nil)
			if i == 0 {
				firsts[k] = true
			}
			got[k] = true
		}
		require.Len(t, got, 4, "every server once per round")
	}
	require.Greater(t, len(firsts), 1, "rounds are shuffled")

	ctx := selector.Track(context.Background())
	got := map[string]bool{}
	for i := 0; i < 4; i++ {
		got[s.Select(ctx, "S", "M", nil)] = true
	}
	require.Len(t, got, 4)
}

func TestPolicyContext(t *testing.T) {
	_, ok := selector.PolicyFrom(context.Background())
	require.False(t, ok)
	p, ok := selector.PolicyFrom(selector.WithPolicy(context.Background(), selector.CallAllWait))
	require.True(t, ok)
	require.Equal(t, selector.CallAllWait, p)
	require.Equal(t, "call_all_wait", p.String())
	require.Equal(t, "unknown", selector.Policy(99).String())
}

func TestOrderAndStrip(t *testing.T) {
	require.Equal(t, "h:1", selector.Strip("tcp@h:1"))
	require.Equal(t, "quic@h:1", selector.Strip("quic@h:1"))
	require.True(t, selector.SameNode("tcp@h:1", "h:1"))
	o := selector.Order([]string{"a", "l", "b", "tcp@l", "c"}, "l")
	require.Equal(t, []string{"l", "tcp@l"}, o[:2])
	require.ElementsMatch(t, []string{"a", "b", "c"}, o[2:])
}

// counter counts the calls one server ran.
type counter struct{ n atomic.Int64 }

func (c *counter) Mul(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	c.n.Add(1)
	r.C = a.A * a.B
	return nil
}

// With real XClients (plain and drop-in) LocalFirst sends every call to the
// local server, and under Failover a dead local server fails over to the
// others.
func TestSelectorsOnXClients(t *testing.T) {
	start := func() (string, *counter, func()) {
		s := server.NewServer()
		c := new(counter)
		require.NoError(t, s.RegisterName("Arith", c, ""))
		addr, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(stop)
		return addr, c, stop
	}
	a, ca, _ := start()
	b, cb, stopB := start()
	d, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + a}, {Key: "tcp@" + b}})
	require.NoError(t, err)
	for _, xc := range []client.XClient{
		client.NewXClient("Arith", client.Failover, client.RandomSelect, d, client.DefaultOption),
		batchclient.NewXClient("Arith", client.Failover, client.RandomSelect, d, client.DefaultOption),
	} {
		xc.SetSelector(selector.NewLocalFirst(b))
		for i := 0; i < 10; i++ {
			var r testsvc.Reply
			require.NoError(t, xc.Call(context.Background(), "Mul", &testsvc.Args{A: 2, B: 3}, &r))
			require.Equal(t, 6, r.C)
		}
		require.NoError(t, xc.Close())
	}
	require.Zero(t, ca.n.Load())
	require.EqualValues(t, 20, cb.n.Load())

	// Random order over both: both get calls.
	xc := client.NewXClient("Arith", client.Failover, client.RandomSelect, d, client.DefaultOption)
	xc.SetSelector(selector.NewRandomOrder())
	for i := 0; i < 10; i++ {
		var r testsvc.Reply
		require.NoError(t, xc.Call(context.Background(), "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	}
	require.NoError(t, xc.Close())
	require.EqualValues(t, 5, ca.n.Load())

	// The local server dies: under Failover, with a context made by Track,
	// every call still succeeds, on the other server, with either XClient.
	stopB()
	bBefore, aBefore := cb.n.Load(), ca.n.Load()
	for _, xc := range []client.XClient{
		client.NewXClient("Arith", client.Failover, client.RandomSelect, d, client.DefaultOption),
		batchclient.NewXClient("Arith", client.Failover, client.RandomSelect, d, client.DefaultOption),
	} {
		xc.SetSelector(selector.NewLocalFirst(b))
		for i := 0; i < 10; i++ {
			var r testsvc.Reply
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := xc.Call(selector.Track(ctx), "Mul", &testsvc.Args{A: i, B: 3}, &r)
			cancel()
			require.NoError(t, err, "call %d with the local server down", i)
			require.Equal(t, 3*i, r.C)
		}
		require.NoError(t, xc.Close())
	}
	require.Equal(t, bBefore, cb.n.Load(), "the stopped local server ran calls")
	require.EqualValues(t, aBefore+20, ca.n.Load(), "the calls did not fail over to the other server")
}
