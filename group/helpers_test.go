package group_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

func TestMain(m *testing.M) {
	// rpcx logs panics and connection closes; the tests cause both.
	// groupLogs drops those and records any line the group package logs.
	log.SetLogger(groupLogs)
	os.Exit(m.Run())
}

// Modes of a Node service.
const (
	modeOK     = "ok"     // answers its name at once
	modeReject = "reject" // returns errNodeRejected
	modePanic  = "panic"  // panics with "node exploded"
	modeHang   = "hang"   // waits until its context ends (at most 10 s)
	modeSlow   = "slow"   // answers its name after 300 ms
	modeGated  = "gated"  // answers its name once released (at most 10 s)
)

var errNodeRejected = errors.New("node rejected")

// Answer is what Node.Do replies.
type Answer struct {
	Node string
	N    int
}

// Node is a test service whose behaviour is set per server, so that one
// call applied to a list gets different answers from different nodes.
type Node struct {
	name  string
	mode  string
	calls atomic.Int64 // Do calls started
	done  atomic.Int64 // Do calls that returned
	oks   atomic.Int64 // Do calls that returned a reply
	// marked counts the Do calls with markedArgs that returned: a test
	// can tell its own calls from others still on their way (the losers of
	// a CallAny start whenever they get there).
	marked atomic.Int64
	// release lets a modeGated call answer, one call a value sent.
	release chan struct{}
}

// markedArgs are Do's arguments for the calls Node.marked counts.
var markedArgs = &testsvc.Args{A: -1, B: 6}

// Do behaves as the node's mode says; N is echoed back.
func (n *Node) Do(ctx context.Context, a *testsvc.Args, r *Answer) error {
	n.calls.Add(1)
	defer n.done.Add(1)
	if *a == *markedArgs {
		defer n.marked.Add(1)
	}
	switch n.mode {
	case modeReject:
		return errNodeRejected
	case modePanic:
		panic("node exploded")
	case modeHang:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("hang: gave up after 10 s")
		}
	case modeSlow:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	case modeGated:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.release:
		case <-time.After(10 * time.Second):
			return errors.New("gated: not released within 10 s")
		}
	}
	r.Node, r.N = n.name, a.A
	n.oks.Add(1)
	return nil
}

// Ints echoes a slice of ints (result fidelity).
func (n *Node) Ints(_ context.Context, a *[]int, r *[]int) error {
	*r = *a
	return nil
}

// Fail returns an error whose text looks like a result (result fidelity).
func (n *Node) Fail(_ context.Context, a *string, _ *Answer) error {
	return errors.New(*a)
}

// newRPCXServer registers Node, Arith and Echo, with the batch plugin when
// batch is set.
func newRPCXServer(t testing.TB, n *Node, batch bool) *server.Server {
	t.Helper()
	s := server.NewServer()
	if batch {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Node", n, ""))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	require.NoError(t, s.RegisterName("Meta", new(metaSvc), ""))
	return s
}

// startNode serves a Node in mode on loopback (batch plugin on when batch
// is set) and returns its address and service.
func startNode(t testing.TB, mode string, batch bool) (string, *Node) {
	t.Helper()
	n := &Node{mode: mode, release: make(chan struct{}, 16)}
	addr, stop, err := testsvc.Serve(newRPCXServer(t, n, batch))
	require.NoError(t, err)
	t.Cleanup(stop)
	n.name = addr
	return addr, n
}

// missingAddr returns a loopback address with nothing listening.
func missingAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// newBatchClient returns a batch client closed when the test ends.
func newBatchClient(t testing.TB) *batchclient.Client {
	t.Helper()
	c, err := batchclient.New(batchclient.WithDialTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newGroup returns a group over a new batch client.
func newGroup(t testing.TB, opts ...group.Option) *group.Group {
	t.Helper()
	g, err := group.New(newBatchClient(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

// withLocal starts a batch server at an address and declares that address
// the local node, served in-process by a separate Node (named "local"), so
// that the network server's counters show any call that left the process.
func withLocal(t testing.TB, mode string) (addr string, inproc, network *Node, opt group.Option) {
	t.Helper()
	addr, network = startNode(t, modeOK, true)
	network.name = "network-copy-of-local"
	inproc = &Node{name: addr, mode: mode}
	return addr, inproc, network, group.WithLocal(addr, map[string]any{"Node": inproc, "Echo": new(testsvc.Echo)})
}

// ctxT returns a context bounded by d, cancelled when the test ends.
func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 5 ms for at most 5 s.
func eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not true after 5 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nodesOf returns the nodes of results.
func nodesOf[R any](rs []group.Result[R]) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Node
	}
	return out
}

// errNodes returns the nodes of node errors.
func errNodes(es []*group.NodeError) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Node
	}
	return out
}

// goroutines returns the number of goroutines, leaving out the batch
// servers' parked workers (a pool that keeps its size after a burst, by
// design), and those running code of package group.
func goroutines() (total, inGroup int, dump string) {
	buf := make([]byte, 4<<20)
	dump = string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "batchserver.(*workers).loop") && strings.Contains(g, "[chan receive") {
			continue
		}
		total++
		if strings.Contains(g, "rpcxbatch/group.") {
			inGroup++
		}
	}
	return total, inGroup, dump
}

// settleGoroutines waits (bounded) until no goroutine runs code of
// package group and the count is at most want, and fails with a dump
// otherwise.
func settleGoroutines(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		total, inGroup, dump := goroutines()
		if total <= want && inGroup == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d (%d in package group), want at most %d and none in group\n%s", total, inGroup, want, dump)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var args = &testsvc.Args{A: 7, B: 6}
