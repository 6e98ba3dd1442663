// Command cluster shows rpcxbatch with a real registry: three rpcx servers
// register in etcd through rpcx-etcd's register plugin wrapped by
// plugin.Advertise (two with the batch plugin, one plain), and a client
// finds them through rpcx-etcd's discovery. The drop-in XClient takes each
// server's path from its registry metadata; a group call reaches all three;
// then one server stops gracefully and both views follow.
//
// It starts a throwaway etcd on free loopback ports (the etcd binary must
// be on PATH: apt-get install -y etcd-server) unless -etcd names one. Every
// server listens on 127.0.0.1, so the run is confined to this machine; on
// several machines each server listens on, and registers, an address the
// others can reach (docs/registry.md, "Several machines").
//
//	go run ./example/cluster          (or: make cluster-example)
//
// Copied into a module of your own, it builds as it is: go mod tidy adds
// rpcx-etcd and etcd's client. In a module that already required
// rpcxbatch before, tidy may report an ambiguous import of a
// google.golang.org/genproto/googleapis package: rpcx's dependencies
// bring an old genproto module along, which still holds the packages
// etcd's client takes from their split modules;
// `go get google.golang.org/genproto@latest` resolves it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	etcdclient "github.com/rpcxio/rpcx-etcd/client"
	"github.com/smallnest/rpcx/client"
	rlog "github.com/smallnest/rpcx/log"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/group"
)

// basePath is the rpcx base path the servers register under (with -etcd,
// followed by the process id, so that runs sharing an etcd do not see
// each other); service is the one service they serve.
const (
	basePath = "/rpcxbatch/cluster-example"
	service  = "Arith"
)

// runTimeout bounds the whole run.
const runTimeout = 20 * time.Second

func main() {
	endpoint := flag.String("etcd", "", "use this etcd (host:port) instead of starting a throwaway one on loopback")
	callers := flag.Int("callers", 200, "goroutines calling through the drop-in XClient")
	each := flag.Int("calls", 50, "calls per goroutine")
	flag.Parse()
	rlog.SetDummyLogger() // rpcx logs every connection close and deregistration
	if err := run(*endpoint, *callers, *each); err != nil {
		if errors.Is(err, errNoEtcd) {
			fmt.Fprintf(os.Stderr, "cluster example: etcd is not installed.\n"+
				"  Debian/Ubuntu: apt-get install -y etcd-server\n  or run an etcd yourself and pass -etcd host:port\n")
			os.Exit(2)
		}
		log.Fatal(err)
	}
}

func counter(r metrics.Registry, name string) int64 {
	if c, ok := r.Get(name).(metrics.Counter); ok {
		return c.Count()
	}
	return 0
}

// waitRegistered reads the keys under prefix from etcd until there are n,
// and returns them with their values.
func waitRegistered(ctx context.Context, endpoint, prefix string, n int) (map[string]string, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		resp, err := c.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("reading %s from etcd: %w", prefix, err)
		}
		if len(resp.Kvs) >= n {
			kv := make(map[string]string, len(resp.Kvs))
			for _, p := range resp.Kvs {
				kv[string(p.Key)] = string(p.Value)
			}
			return kv, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d servers registered under %s: %w", n, prefix, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitFor polls cond every 10 ms until it holds or timeout passes, and
// returns how long it took.
func waitFor(timeout time.Duration, what string, cond func() bool) (time.Duration, error) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("%s: not after %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start), nil
}

func run(endpoint string, callers, each int) error {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	base := basePath
	if endpoint == "" {
		t0 := time.Now()
		e, err := startEtcd(ctx)
		if err != nil {
			return err
		}
		defer e.stop()
		endpoint = e.endpoint
		fmt.Printf("etcd: throwaway single-member etcd on %s (ready in %v)\n", endpoint, time.Since(t0).Round(time.Millisecond))
	} else {
		base = fmt.Sprintf("%s-%d", basePath, os.Getpid())
		fmt.Printf("etcd: %s\n", endpoint)
	}

	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for _, s := range []struct {
		name  string
		batch bool
	}{{"node-1", true}, {"node-2", true}, {"node-3", false}} {
		n, err := startNode(endpoint, base, s.name, s.batch)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	byAddr := map[string]*node{}
	for _, n := range nodes {
		byAddr[n.addr] = n
	}

	// What the servers published, read straight from etcd.
	published, err := waitRegistered(ctx, endpoint, base+"/"+service+"/", len(nodes))
	if err != nil {
		return err
	}
	fmt.Printf("\nregistered in etcd (key: metadata):\n")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, n := range nodes {
		key := base + "/" + service + "/tcp@" + n.addr
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", n.name, key, published[key])
	}
	tw.Flush()

	// The client side knows only etcd, the base path and the service.
	// allowKeyNotFound lets a discovery start before any server registers
	// and report an empty list when the last one leaves. It is made after
	// the servers registered: rpcx-etcd v0.5.0's discovery can miss a
	// change made while it starts watching (see the README).
	d, err := etcdclient.NewEtcdV3Discovery(base, service, []string{endpoint}, true, nil)
	if err != nil {
		return fmt.Errorf("etcd discovery: %w", err)
	}
	defer d.Close()

	// The drop-in XClient over the discovery: call sites are plain rpcx.
	reg := metrics.NewRegistry()
	bc, err := batchclient.New(batchclient.WithMetrics(reg))
	if err != nil {
		return err
	}
	defer bc.Close()
	xc := batchclient.NewXClientWith(bc, service, client.Failover, client.RoundRobin, d, client.DefaultOption)
	defer xc.Close()

	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	t0 := time.Now()
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				var r Reply
				if err := xc.Call(ctx, "Mul", &Args{A: g, B: i}, &r); err != nil || r.C != g*i {
					failed.Add(1)
					if err == nil {
						err = fmt.Errorf("Mul(%d, %d) = %d", g, i, r.C)
					}
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(t0)
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("%d calls failed, the first: %w", failed.Load(), *p)
	}
	fmt.Printf("\ndrop-in XClient over the etcd discovery (Failover, RoundRobin): %d goroutines x %d calls = %d calls in %v\n",
		callers, each, callers*each, took.Round(time.Millisecond))
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  server\tpath\tcalls served\tbatch frames\tcalls per frame\n")
	for _, n := range nodes {
		info := bc.Info(n.addr)
		if n.batch == nil {
			fmt.Fprintf(tw, "  %s\tplain rpcx (%s=0: no handshake, lanes %s)\t%d\t-\t-\n",
				n.name, codec.MetaBatch, info.Status, n.svc.calls.Load())
			continue
		}
		calls, frames := counter(n.batch.Metrics(), "rpcxbatch.server.calls"), counter(n.batch.Metrics(), "rpcxbatch.server.frames")
		fmt.Fprintf(tw, "  %s\tbatch, %d lanes (%s)\t%d\t%d\t%.1f\n",
			n.name, info.Lanes, info.Status, n.svc.calls.Load(), frames, float64(calls)/float64(max(frames, 1)))
	}
	tw.Flush()
	fmt.Printf("  client: %d frames sent, %d servers found plain by probing\n",
		counter(reg, "rpcxbatch.client.frames"), counter(reg, "rpcxbatch.client.fallbacks"))

	// Group calls over the node list of the same discovery.
	g, err := group.New(bc, group.WithDiscovery(d))
	if err != nil {
		return err
	}
	defer g.Close()
	if err := groupCall(ctx, g, byAddr, "group.CallAllWait over the etcd node list"); err != nil {
		return err
	}

	// A graceful stop: node-2 deregisters and shuts down; the discovery
	// and the group drop it at once (a crashed server would stay listed
	// until its lease ran out, about 30 s).
	leaving := nodes[1]
	fmt.Printf("\n%s stops gracefully (rpcx Shutdown: deregister, drain, close)\n", leaving.name)
	t0 = time.Now()
	leaving.stop()
	stopped := time.Since(t0)
	if _, err := waitFor(5*time.Second, leaving.name+" out of the discovery and the group", func() bool {
		return !slices.ContainsFunc(d.GetServices(), func(p *client.KVPair) bool { return hostport(p.Key) == leaving.addr }) &&
			!slices.Contains(g.Nodes(), leaving.addr)
	}); err != nil {
		return err
	}
	fmt.Printf("  stopped in %v; gone from the XClient's discovery and the group's node list %v after the stop began\n",
		stopped.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	before := leaving.svc.calls.Load()
	for i := range 30 {
		var r Reply
		if err := xc.Call(ctx, "Mul", &Args{A: i, B: 2}, &r); err != nil {
			return fmt.Errorf("call after the stop: %w", err)
		}
	}
	fmt.Printf("  30 more XClient calls: all succeeded, %d reached %s\n", leaving.svc.calls.Load()-before, leaving.name)
	return groupCall(ctx, g, byAddr, "group.CallAllWait again")
}

// groupCall asks every node of the group for its name and prints who
// answered.
func groupCall(ctx context.Context, g *group.Group, byAddr map[string]*node, title string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, errs := group.CallAllWait[string](cctx, g, service, "Name", &Args{})
	slices.SortFunc(rs, func(a, b group.Result[string]) int { return cmpName(byAddr, a.Node, b.Node) })
	fmt.Printf("\n%s: %d nodes\n", title, len(g.Nodes()))
	for _, r := range rs {
		n := byAddr[r.Node]
		if n == nil {
			fmt.Printf("  %s answered %q\n", r.Node, r.Value)
			continue
		}
		path := "batch"
		if n.batch == nil {
			path = "plain"
		}
		fmt.Printf("  %s (%s, %s) answered %q\n", n.name, r.Node, path, r.Value)
	}
	for _, e := range errs {
		fmt.Printf("  %s failed: %v\n", e.Node, e)
	}
	if len(errs) > 0 {
		return fmt.Errorf("group call: %d nodes failed", len(errs))
	}
	return nil
}

// hostport strips rpcx's "network@" prefix from a discovery key.
func hostport(key string) string {
	if _, hp, ok := strings.Cut(key, "@"); ok {
		return hp
	}
	return key
}

// cmpName orders addresses (or discovery keys) by server name.
func cmpName(byAddr map[string]*node, a, b string) int {
	na, nb := byAddr[hostport(a)], byAddr[hostport(b)]
	switch {
	case na == nil || nb == nil:
		return 0
	case na.name < nb.name:
		return -1
	case na.name > nb.name:
		return 1
	}
	return 0
}
