package registry_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	etcdclient "github.com/rpcxio/rpcx-etcd/client"
	"github.com/rpcxio/rpcx-etcd/serverplugin"
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/etcdtest"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
	"github.com/rpcxbatch/rpcxbatch/plugin"
)

// service is the rpcx service path every test server registers.
const service = "Arith"

// Counter is the test service: Arith.Mul, counted, so that a test sees
// which servers served its calls whatever path they took.
type Counter struct {
	calls atomic.Int64
}

// Mul multiplies and counts.
func (c *Counter) Mul(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	c.calls.Add(1)
	r.C = a.A * a.B
	return nil
}

// requestLog is an rpcx server plugin that records the service paths of
// the requests a server reads: how a test tells that a plain server never
// got a batch handshake.
type requestLog struct {
	mu    sync.Mutex
	paths map[string]int
}

func (l *requestLog) PostReadRequest(_ context.Context, m *protocol.Message, _ error) error {
	if m == nil {
		return nil
	}
	l.mu.Lock()
	if l.paths == nil {
		l.paths = make(map[string]int)
	}
	l.paths[m.ServicePath+"."+m.ServiceMethod]++
	l.mu.Unlock()
	return nil
}

func (l *requestLog) count(pathMethod string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paths[pathMethod]
}

// node is one rpcx server registered in etcd through plugin.Advertise.
type node struct {
	addr  string // host:port, as group calls and batchclient name it
	key   string // "tcp@host:port", the key in etcd and in the discovery
	srv   *server.Server
	reg   *serverplugin.EtcdV3RegisterPlugin
	batch *batchserver.Plugin // nil: a plain server
	svc   *Counter
	seen  *requestLog

	served   chan struct{} // closed when ServeListener has returned
	stopOnce sync.Once
}

// startNode serves Counter as "Arith" on a loopback port and registers it
// under base in etcd: with the batch plugin (advertised rpcxbatch=1) when
// batch is set, plain (advertised rpcxbatch=0) otherwise. It returns once
// the server is listening; the registration reaches etcd a moment later.
//
// The order works around two traits of rpcx-etcd v0.5.0: Register writes
// the previous service's paths, not its own, unless ServerStarted is set
// (then it writes after ServerStarted closes); and the plugin's refresh
// goroutine reads its service list without a lock, so every Register
// happens before Start and UpdateInterval is longer than a test.
func startNode(endpoint, base string, batch bool) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	addr := ln.Addr().String()
	n := &node{addr: addr, key: "tcp@" + addr, srv: server.NewServer(), svc: &Counter{},
		seen: &requestLog{}, served: make(chan struct{})}
	n.srv.Plugins.Add(n.seen)
	if batch {
		if n.batch, err = batchserver.New(n.srv); err != nil {
			ln.Close()
			return nil, fmt.Errorf("batch plugin: %w", err)
		}
	}
	started := make(chan struct{})
	n.reg = &serverplugin.EtcdV3RegisterPlugin{
		ServiceAddress: n.key,
		EtcdServers:    []string{endpoint},
		BasePath:       base,
		UpdateInterval: time.Minute,
		ServerStarted:  started,
	}
	n.srv.Plugins.Add(plugin.Advertise(n.reg, n.batch))
	if err := n.srv.RegisterName(service, n.svc, ""); err != nil {
		ln.Close()
		return nil, fmt.Errorf("register: %w", err)
	}
	if err := n.reg.Start(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("etcd register plugin: %w", err)
	}
	go func() {
		defer close(n.served)
		n.srv.ServeListener("tcp", ln)
	}()
	select {
	case <-n.srv.Started:
	case <-time.After(5 * time.Second):
		n.stop()
		return nil, errors.New("server did not start")
	}
	close(started) // listening: publish the registration now
	return n, nil
}

// leave deregisters the server from etcd (rpcx's UnregisterAll, which the
// wrapper passes to the etcd plugin) while it keeps serving: the first
// half of a graceful stop.
func (n *node) leave() error { return n.srv.UnregisterAll() }

// stop stops the server gracefully: deregistered (if leave was not
// called), in-flight requests finished, connections closed, and the etcd
// plugin's goroutine and client closed. Idempotent.
func (n *node) stop() {
	n.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.srv.Shutdown(ctx)
		select {
		case <-n.served:
		case <-time.After(5 * time.Second):
		}
		n.reg.Stop()
	})
}

// serverCounter reads a batch server's go-metrics counter.
func (n *node) serverCounter(t testing.TB, name string) int64 {
	t.Helper()
	return counter(t, n.batch.Metrics(), name)
}

// counter reads a go-metrics counter; one that does not exist fails the
// test, so that a check that it is zero cannot pass after a rename.
func counter(t testing.TB, r metrics.Registry, name string) int64 {
	t.Helper()
	c, ok := r.Get(name).(metrics.Counter)
	if !ok {
		t.Fatalf("no counter %q in the registry", name)
	}
	return c.Count()
}

// mustNode is startNode for a test, stopped at its end.
func mustNode(t *testing.T, e *etcdtest.Etcd, base string, batch bool) *node {
	t.Helper()
	n, err := startNode(e.Endpoint, base, batch)
	require.NoError(t, err)
	t.Cleanup(n.stop)
	return n
}

// newDiscovery returns rpcx-etcd's discovery of the test service under
// base, closed at the end of the test. allowKeyNotFound is true so that it
// starts before any server registers and reports an empty list when the
// last server leaves.
func newDiscovery(t *testing.T, e *etcdtest.Etcd, base string) client.ServiceDiscovery {
	t.Helper()
	d, err := etcdclient.NewEtcdV3Discovery(base, service, []string{e.Endpoint}, true, nil)
	require.NoError(t, err)
	t.Cleanup(d.Close)
	return d
}

// syncDiscoveries returns once every discovery in ds watches etcd and
// lists every server registered so far.
//
// rpcx-etcd v0.5.0's discovery lists the service path and only then
// starts its etcd watch, without a start revision: a registration that
// lands in between is missed until the next change under the path (about
// one start in ten here, with servers registering as the discovery
// starts). So the test makes such changes itself: a sentinel key, put
// again every 100 ms until every discovery lists it (a put in the gap is
// missed like any other), then deleted. Seeing the delete proves the
// watch is live, and every event makes the discovery list the path again.
func syncDiscoveries(t *testing.T, e *etcdtest.Etcd, base string, ds ...client.ServiceDiscovery) {
	t.Helper()
	const sentinel = "tcp@sentinel.invalid:1"
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	ctx := ctxT(t, 10*time.Second)
	key := base + "/" + service + "/" + sentinel
	all := func(listed bool) bool {
		for _, d := range ds {
			if slices.Contains(keys(d), sentinel) != listed {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; !all(true); i++ {
		if time.Now().After(deadline) {
			t.Fatal("the discoveries never listed the sentinel key")
		}
		_, err = c.Put(ctx, key, strconv.Itoa(i))
		require.NoError(t, err)
		for wait := time.Now().Add(100 * time.Millisecond); time.Now().Before(wait) && !all(true); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	_, err = c.Delete(ctx, key)
	require.NoError(t, err)
	eventually(t, 5*time.Second, "sentinel out of the discoveries", func() bool { return all(false) })
}

// keys returns the server keys a discovery lists, sorted.
func keys(d client.ServiceDiscovery) []string {
	var ks []string
	for _, p := range d.GetServices() {
		ks = append(ks, p.Key)
	}
	slices.Sort(ks)
	return ks
}

// etcdValues reads every key under prefix straight from etcd.
func etcdValues(t *testing.T, e *etcdtest.Etcd, prefix string) map[string]string {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// meta parses rpcx's URL-query service metadata.
func meta(t *testing.T, s string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(s)
	require.NoError(t, err, "metadata %q", s)
	return v
}

// eventually polls cond every 20 ms until it holds, and returns how long
// that took; the test fails after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// childEnv carries "endpoint base" to a re-executed test binary, which
// then runs a batch server registered in etcd (runChild) instead of the
// tests: a server the test can SIGKILL, so that it dies without
// deregistering and its lease runs out on its own.
const childEnv = "RPCXBATCH_REGISTRY_CHILD"

// childLifetime bounds a child whose parent neither kills it nor closes
// its stdin.
const childLifetime = 2 * time.Minute

// runChild is the child's main: it serves until its stdin closes (its
// parent is done with it) or it is killed, and prints its address first.
func runChild(spec string) int {
	endpoint, base, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintln(os.Stderr, "child: bad spec", spec)
		return 2
	}
	n, err := startNode(endpoint, base, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println(n.addr)
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-time.After(childLifetime):
	}
	n.stop()
	return 0
}

// child is a server process started by startChild.
type child struct {
	addr   string
	key    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	stderr syncWriter
}

// startChild re-executes the test binary as a batch server registered
// under base; the test's cleanup kills it if the test has not.
func startChild(t *testing.T, e *etcdtest.Etcd, base string) *child {
	t.Helper()
	c := &child{exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+e.Endpoint+" "+base)
	c.cmd.SysProcAttr = etcdtest.ChildProcAttr()
	c.cmd.Stderr = &c.stderr
	var err error
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	lines := make(chan string, 1)
	go func() {
		// Reads the address line, then drains stdout until the child exits.
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		// The child's owner: reaps it; kill waits for it.
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.kill)
	select {
	case line, ok := <-lines:
		require.True(t, ok, "child server exited without an address; stderr: %s", c.stderr.String())
		c.addr, c.key = line, "tcp@"+line
	case <-time.After(30 * time.Second):
		t.Fatalf("child server did not start; stderr: %s", c.stderr.String())
	}
	return c
}

// kill sends SIGKILL and waits (bounded) for the child to exit: a crash,
// with no deregistration. Idempotent.
func (c *child) kill() {
	c.cmd.Process.Kill()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
	}
	c.stdin.Close()
}

// syncWriter collects a child's stderr: written by exec's copying
// goroutine, read by the test.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
