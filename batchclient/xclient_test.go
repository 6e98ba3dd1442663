package batchclient_test

import (
	"context"
	"sync/atomic"
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

func newDropIn(t *testing.T, addrs ...string) client.XClient {
	t.Helper()
	var pairs []*client.KVPair
	for _, a := range addrs {
		pairs = append(pairs, &client.KVPair{Key: "tcp@" + a})
	}
	d, err := client.NewMultipleServersDiscovery(pairs)
	require.NoError(t, err)
	xc := batchclient.NewXClient("Arith", client.Failtry, client.RoundRobin, d, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })
	return xc
}

// The drop-in against a plain rpcx v1.9.4 server: correct replies over the
// plain path.
func TestDropInFallsBackToPlainRPCX(t *testing.T) {
	addr, _ := startServer(t, true)
	xc := newDropIn(t, addr)
	for i := 0; i < 50; i++ {
		var r testsvc.Reply
		require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: i, B: 2}, &r))
		assert.Equal(t, 2*i, r.C)
	}
}

func TestDropInMixedPeers(t *testing.T) {
	batchAddr, p := startServer(t, false)
	plainAddr, plainOneshots := startCountingPlain(t)
	xc := newDropIn(t, batchAddr, plainAddr)
	ctx := ctxT(t, 10*time.Second)

	for i := 0; i < 20; i++ {
		var r testsvc.Reply
		require.NoError(t, xc.Call(ctx, "Mul", &testsvc.Args{A: i, B: 3}, &r))
		assert.Equal(t, 3*i, r.C)
	}
	// RoundRobin over two servers: half the calls went through the batch
	// plugin.
	assert.Equal(t, int64(10), counter(t, p, "rpcxbatch.server.calls"))

	call, err := xc.Go(ctx, "Mul", &testsvc.Args{A: 4, B: 5}, &testsvc.Reply{}, nil)
	require.NoError(t, err)
	<-call.Done
	require.NoError(t, call.Error)
	assert.Equal(t, 20, call.Reply.(*testsvc.Reply).C)

	var r testsvc.Reply
	require.NoError(t, xc.Broadcast(ctx, "Mul", &testsvc.Args{A: 7, B: 6}, &r))
	assert.Equal(t, 42, r.C)
	r = testsvc.Reply{}
	require.NoError(t, xc.Fork(ctx, "Mul", &testsvc.Args{A: 7, B: 7}, &r))
	assert.Equal(t, 49, r.C)
	// rpcx v1.9.4's Inform returns an empty *MultiError even when every
	// server succeeded (plain rpcx does the same); the receipts tell.
	receipts, _ := xc.Inform(ctx, "Mul", &testsvc.Args{A: 2, B: 2}, &testsvc.Reply{})
	require.Len(t, receipts, 2)
	for _, rc := range receipts {
		assert.Equal(t, 4, rc.Reply.(*testsvc.Reply).C, rc.Address)
	}

	before := counter(t, p, "rpcxbatch.server.casts")
	// Oneshots of Sleep, which no other call of this test makes (a Fork's
	// call to the slower server may still arrive after it returned).
	for i := 0; i < 10; i++ {
		require.NoError(t, xc.Oneshot(ctx, "Sleep", &testsvc.Args{A: 0, B: i}))
	}
	casts := p.Metrics().Get("rpcxbatch.server.casts").(interface{ Count() int64 })
	require.Eventually(t, func() bool { return casts.Count() == before+5 },
		5*time.Second, 10*time.Millisecond, "oneshots on the batch peer run as casts")
	if !assert.Eventually(t, func() bool { return plainOneshots.Load() == 5 },
		5*time.Second, 10*time.Millisecond) {
		t.Fatalf("%d of the 5 oneshots to the plain peer ran (the batch peer ran %d)", plainOneshots.Load(), casts.Count()-before)
	}
}

// countingArith is Arith's Mul, and a Sleep that only counts: the plain
// server of a mixed pool.
type countingArith struct{ sleeps *atomic.Int64 }

// Mul multiplies.
func (countingArith) Mul(_ context.Context, args *testsvc.Args, r *testsvc.Reply) error {
	r.C = args.A * args.B
	return nil
}

// Sleep counts its runs and returns B at once.
func (a countingArith) Sleep(_ context.Context, args *testsvc.Args, r *testsvc.Reply) error {
	a.sleeps.Add(1)
	r.C = args.B
	return nil
}

// startCountingPlain serves countingArith over plain rpcx (no batch
// plugin) on loopback, and returns its address and count of Sleep runs.
func startCountingPlain(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	s := server.NewServer()
	sleeps := new(atomic.Int64)
	require.NoError(t, s.RegisterName("Arith", countingArith{sleeps}, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, sleeps
}

func TestDropInOneshotWithoutReply(t *testing.T) {
	addr, p := startServer(t, false)
	xc := newDropIn(t, addr)
	require.NoError(t, xc.Oneshot(context.Background(), "Mul", &testsvc.Args{A: 1, B: 1}))
	casts := p.Metrics().Get("rpcxbatch.server.casts").(interface{ Count() int64 })
	require.Eventually(t, func() bool { return casts.Count() == 1 },
		5*time.Second, 10*time.Millisecond)
}

// counter reads a counter of the plugin's registry; one that does not
// exist fails the test.
func counter(t testing.TB, p *batchserver.Plugin, name string) int64 {
	t.Helper()
	c, _ := p.Metrics().Get(name).(interface{ Count() int64 })
	if c == nil {
		t.Fatalf("no counter %q in the server's registry", name)
	}
	return c.Count()
}
