package registry_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// handshake is the request a batch client opens a lane with.
const handshake = codec.ServicePath + "." + codec.MethodHandshake

// A batch server and a plain server registered through plugin.Advertise
// show their kind in etcd, and rpcx-etcd's discovery hands it to clients.
func TestRegistrationVisible(t *testing.T) {
	e := needEtcd(t)
	t.Parallel()
	base := basePath(t)
	b := mustNode(t, e, base, true)
	p := mustNode(t, e, base, false)

	bKey, pKey := base+"/"+service+"/"+b.key, base+"/"+service+"/"+p.key
	var kv map[string]string
	eventually(t, 5*time.Second, "both servers in etcd", func() bool {
		kv = etcdValues(t, e, base+"/"+service+"/")
		_, okB := kv[bKey]
		_, okP := kv[pKey]
		return okB && okP
	})
	bm, pm := meta(t, kv[bKey]), meta(t, kv[pKey])
	assert.Equal(t, "1", bm.Get(codec.MetaBatch), "batch server's metadata: %s", kv[bKey])
	assert.Equal(t, strconv.Itoa(b.batch.Options().PoolSize), bm.Get(codec.MetaPoolSize))
	assert.Equal(t, "0", pm.Get(codec.MetaBatch), "plain server's metadata: %s", kv[pKey])
	assert.False(t, pm.Has(codec.MetaPoolSize))

	d := newDiscovery(t, e, base)
	syncDiscoveries(t, e, base, d)
	got := map[string]string{}
	for _, kv := range d.GetServices() {
		got[kv.Key] = kv.Value
	}
	assert.Equal(t, map[string]string{b.key: kv[bKey], p.key: kv[pKey]}, got)
}

// The drop-in XClient over etcd discovery: batch servers get lanes (their
// plugin counts every call they serve), the server advertised rpcxbatch=0
// gets plain rpcx and never a handshake.
func TestClientTakesPathFromMetadata(t *testing.T) {
	e := needEtcd(t)
	t.Parallel()
	base := basePath(t)
	b1 := mustNode(t, e, base, true)
	b2 := mustNode(t, e, base, true)
	p := mustNode(t, e, base, false)
	d := newDiscovery(t, e, base)
	syncDiscoveries(t, e, base, d)
	eventually(t, 5*time.Second, "three servers discovered", func() bool { return len(d.GetServices()) == 3 })

	reg := metrics.NewRegistry()
	bc, err := batchclient.New(batchclient.WithMetrics(reg))
	require.NoError(t, err)
	t.Cleanup(func() { bc.Close() })
	xc := batchclient.NewXClientWith(bc, service, client.Failtry, client.RoundRobin, d, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })

	const callers, each = 64, 30
	ctx := ctxT(t, 20*time.Second)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				var r testsvc.Reply
				if err := xc.Call(ctx, "Mul", &testsvc.Args{A: g, B: i}, &r); err != nil || r.C != g*i {
					if failed.Add(1) == 1 {
						t.Errorf("call %d*%d: %d, %v", g, i, r.C, err)
					}
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load())

	total := b1.svc.calls.Load() + b2.svc.calls.Load() + p.svc.calls.Load()
	assert.Equal(t, int64(callers*each), total)
	for _, n := range []*node{b1, b2, p} {
		assert.Positive(t, n.svc.calls.Load(), "RoundRobin reached %s", n.addr)
	}
	for _, n := range []*node{b1, b2} {
		assert.Equal(t, n.svc.calls.Load(), n.serverCounter(t, "rpcxbatch.server.calls"),
			"every call %s served came through its batch plugin", n.addr)
		assert.Equal(t, batchclient.Connected, bc.Info(n.addr).Status, "lanes to %s", n.addr)
		// The batch plugin hides its lane messages from request hooks and
		// runs them per entry: the log sees each batched call, no handshake.
		assert.Equal(t, n.svc.calls.Load(), int64(n.seen.count(service+".Mul")),
			"the request log of %s sees every batched call", n.addr)
		assert.Zero(t, n.seen.count(handshake), "request hooks of %s saw a lane handshake", n.addr)
	}
	assert.Equal(t, p.svc.calls.Load(), int64(p.seen.count(service+".Mul")),
		"the request log of the plain server sees its calls")
	assert.Equal(t, batchclient.NotConnected, bc.Info(p.addr).Status, "no lane pool was tried for the plain server")
	assert.Zero(t, p.seen.count(handshake), "the plain server got a batch handshake")
	assert.Zero(t, counter(t, reg, "rpcxbatch.client.fallbacks"), "no server was found plain by probing")
	batched := b1.svc.calls.Load() + b2.svc.calls.Load()
	frames := b1.serverCounter(t, "rpcxbatch.server.frames") + b2.serverCounter(t, "rpcxbatch.server.frames")
	t.Logf("%d calls: %d batched in %d frames (%.1f per frame), %d plain",
		total, batched, frames, float64(batched)/float64(max(frames, 1)), p.svc.calls.Load())
}

// nodesOf returns the nodes of group results, sorted.
func nodesOf(rs []group.Result[testsvc.Reply]) []string {
	var ns []string
	for _, r := range rs {
		ns = append(ns, r.Node)
	}
	slices.Sort(ns)
	return ns
}

func addrs(ns ...*node) []string {
	var as []string
	for _, n := range ns {
		as = append(as, n.addr)
	}
	slices.Sort(as)
	return as
}

// callAll runs a group CallAll (unreachable nodes count as errors) and
// returns the nodes that answered.
func callAll(t *testing.T, g *group.Group) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs, err := group.CallAll[testsvc.Reply](ctx, g, service, "Mul", &testsvc.Args{A: 6, B: 7}, group.Unreachable(true))
	require.NoError(t, err)
	for _, r := range rs {
		assert.Equal(t, 42, r.Value.C, r.Node)
	}
	return nodesOf(rs)
}

// Group calls over the node list of an etcd discovery follow servers as
// they join and leave; batch and plain servers mix in one list.
func TestGroupFollowsJoinAndLeave(t *testing.T) {
	e := needEtcd(t)
	t.Parallel()
	base := basePath(t)
	d := newDiscovery(t, e, base) // before any server: allowKeyNotFound
	syncDiscoveries(t, e, base, d)
	bc, err := batchclient.New()
	require.NoError(t, err)
	t.Cleanup(func() { bc.Close() })
	g, err := group.New(bc, group.WithDiscovery(d))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	assert.Empty(t, g.Nodes())

	n1 := mustNode(t, e, base, true)
	n2 := mustNode(t, e, base, false)
	took := eventually(t, 5*time.Second, "two servers in the group", func() bool { return slices.Equal(g.Nodes(), addrs(n1, n2)) })
	t.Logf("two servers joined the group in %v", took)
	assert.Equal(t, addrs(n1, n2), callAll(t, g))

	n3 := mustNode(t, e, base, true)
	took = eventually(t, 5*time.Second, "third server in the group", func() bool { return slices.Equal(g.Nodes(), addrs(n1, n2, n3)) })
	t.Logf("a third server joined in %v", took)
	assert.Equal(t, addrs(n1, n2, n3), callAll(t, g))

	n1.stop()
	took = eventually(t, 5*time.Second, "stopped server out of the group", func() bool { return slices.Equal(g.Nodes(), addrs(n2, n3)) })
	t.Logf("a stopped server left the group in %v", took)
	assert.Equal(t, addrs(n2, n3), callAll(t, g))

	n2.stop()
	n3.stop()
	eventually(t, 5*time.Second, "empty group", func() bool { return len(g.Nodes()) == 0 })
	_, err = group.CallOne[testsvc.Reply](ctxT(t, 5*time.Second), g, service, "Mul", &testsvc.Args{})
	assert.ErrorIs(t, err, group.ErrEmptyNodes)
}

// A server stopped gracefully (deregistered, then shut down) leaves the
// client's view at once: under steady traffic through the drop-in XClient
// no call fails, later calls go to the servers that remain, and group
// calls skip it.
func TestGracefulStopLeavesAtOnce(t *testing.T) {
	e := needEtcd(t)
	t.Parallel()
	base := basePath(t)
	a := mustNode(t, e, base, true)
	b := mustNode(t, e, base, true)
	p := mustNode(t, e, base, false)
	dx, dg := newDiscovery(t, e, base), newDiscovery(t, e, base)
	syncDiscoveries(t, e, base, dx, dg)
	bc, err := batchclient.New()
	require.NoError(t, err)
	t.Cleanup(func() { bc.Close() })
	xc := batchclient.NewXClientWith(bc, service, client.Failtry, client.RoundRobin, dx, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })
	g, err := group.New(bc, group.WithDiscovery(dg))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	eventually(t, 5*time.Second, "three servers discovered", func() bool {
		return len(dx.GetServices()) == 3 && len(g.Nodes()) == 3
	})

	// Steady traffic while a leaves; Failtry retries on the same server,
	// so a call that fails here was sent to a server that was gone.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var r testsvc.Reply
				err := xc.Call(ctx, "Mul", &testsvc.Args{A: 3, B: 4}, &r)
				cancel()
				calls.Add(1)
				if err != nil || r.C != 12 {
					if failed.Add(1) == 1 {
						t.Errorf("call during the stop: %d, %v", r.C, err)
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	eventually(t, 5*time.Second, "traffic on a", func() bool { return a.svc.calls.Load() > 50 })

	// Deregister first and let clients see it; only then stop serving.
	left := time.Now()
	require.NoError(t, a.leave())
	took := eventually(t, 5*time.Second, "a out of the XClient's discovery", func() bool {
		return !slices.Contains(keys(dx), a.key)
	})
	eventually(t, 5*time.Second, "a out of the group", func() bool { return slices.Equal(g.Nodes(), addrs(b, p)) })
	t.Logf("deregistered server left the client's view in %v, the group's in %v", took, time.Since(left))
	assert.Less(t, took, 2*time.Second, "a graceful stop is seen at once, not after a lease")
	time.Sleep(200 * time.Millisecond) // calls already routed to a finish
	a.stop()

	before := a.svc.calls.Load()
	n := calls.Load()
	eventually(t, 10*time.Second, "traffic after the stop", func() bool { return calls.Load() > n+200 })
	assert.Equal(t, before, a.svc.calls.Load(), "no call reached the stopped server")
	assert.Equal(t, addrs(b, p), callAll(t, g))
	assert.Zero(t, failed.Load(), "calls failed around the graceful stop")
	t.Logf("%d calls, %d failed", calls.Load(), failed.Load())
}

// A killed server (no deregistration) stays listed until its etcd lease
// runs out, about 30 s with rpcx-etcd v0.5.0. Meanwhile the drop-in with
// Failover serves every call from the live server, and group calls report
// the dead one unreachable; then it leaves both views.
func TestKilledServerLeavesWithinLease(t *testing.T) {
	e := needEtcd(t)
	t.Parallel()
	base := basePath(t)
	dead := startChild(t, e, base)
	live := mustNode(t, e, base, true)
	dx, dg := newDiscovery(t, e, base), newDiscovery(t, e, base)
	syncDiscoveries(t, e, base, dx, dg)
	bc, err := batchclient.New(batchclient.WithDialTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { bc.Close() })
	xc := batchclient.NewXClientWith(bc, service, client.Failover, client.RoundRobin, dx, client.DefaultOption)
	t.Cleanup(func() { xc.Close() })
	g, err := group.New(bc, group.WithDiscovery(dg))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	both := []string{dead.addr, live.addr}
	slices.Sort(both)
	eventually(t, 10*time.Second, "both servers discovered", func() bool {
		return len(dx.GetServices()) == 2 && slices.Equal(g.Nodes(), both)
	})
	assert.Equal(t, both, callAll(t, g))

	dead.kill()
	killed := time.Now()
	var calls, unreachable int
	for slices.Contains(keys(dx), dead.key) || slices.Contains(g.Nodes(), dead.addr) {
		if time.Since(killed) > 45*time.Second {
			t.Fatalf("killed server still listed after %v", time.Since(killed))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var r testsvc.Reply
		require.NoError(t, xc.Call(ctx, "Mul", &testsvc.Args{A: 5, B: 5}, &r), "Failover call while the dead server is listed")
		calls++
		rs, errs := group.CallAllWait[testsvc.Reply](ctx, g, service, "Mul", &testsvc.Args{A: 1, B: 1})
		cancel()
		assert.Equal(t, []string{live.addr}, nodesOf(rs))
		for _, ne := range errs {
			assert.Equal(t, dead.addr, ne.Node)
			assert.True(t, errors.Is(ne, group.ErrUnreachable), "dead node: %v", ne)
			unreachable++
		}
		time.Sleep(250 * time.Millisecond)
	}
	gone := time.Since(killed)
	t.Logf("killed server left after %v (lease); meanwhile %d Failover calls succeeded, the group reported it unreachable %d times",
		gone, calls, unreachable)
	assert.Less(t, gone, 40*time.Second)
	assert.Positive(t, unreachable)
	assert.Equal(t, []string{live.addr}, callAll(t, g))
}
