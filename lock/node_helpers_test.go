package lock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
)

func init() { rlog.SetDummyLogger() }

// serveNode starts an rpcx server with the batch plugin on loopback and a
// lock node on it that reaches the others over its own batchclient.
func serveNode(t testing.TB) *Node {
	t.Helper()
	n, _ := serveNodeKill(t)
	return n
}

// serveNodeKill is serveNode that also returns a kill: the node's server
// and transport stop at once, without a word to the other nodes, as if
// its process died.
func serveNodeKill(t testing.TB) (*Node, func()) {
	t.Helper()
	return serveNodeAt(t, testenv.RestartAddr(t))
}

// serveNodeAt is serveNodeKill at a given address (a restart).
func serveNodeAt(t testing.TB, at string) (*Node, func()) {
	t.Helper()
	n, kill, err := startNode(at)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kill)
	return n, kill
}

// startNode starts a server with the batch plugin at addr and a lock node
// on it; kill stops all three.
func startNode(at string) (*Node, func(), error) {
	return startNodeOver(at, false)
}

// startNodeOver is startNode whose node reaches the others over plain rpcx
// when plain is set.
func startNodeOver(at string, plain bool) (*Node, func(), error) {
	return startNodeTimeout(at, plain, 0)
}

// startNodeTimeout is startNodeOver with Config.NodeTimeout set (0: the
// default).
func startNodeTimeout(at string, plain bool, nodeTimeout time.Duration) (*Node, func(), error) {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		return nil, nil, err
	}
	addr, stop, err := serveAt(s, at)
	if err != nil {
		return nil, nil, err
	}
	var bc interface {
		Transport
		Close() error
	}
	if plain {
		bc = NewPlainTransport(client.DefaultOption)
	} else if bc, err = batchclient.New(); err != nil {
		stop()
		return nil, nil, err
	}
	mute := &muteTransport{Transport: bc}
	n, err := New(Config{Server: s, Addr: addr, Transport: mute, NodeTimeout: nodeTimeout})
	if err != nil {
		bc.Close()
		stop()
		return nil, nil, err
	}
	var once sync.Once
	kill := func() {
		once.Do(func() {
			// Silent first, as when the process dies: the node's Close
			// can then tell the other nodes nothing. The transport closes
			// last, when the node's goroutines are done with it.
			mute.mute()
			stop()
			n.Close()
			bc.Close()
		})
	}
	return n, kill, nil
}

// muteTransport is a Transport that fails every call once muted: a node
// whose process died sends nothing more.
type muteTransport struct {
	Transport
	muted atomic.Bool
}

var errMuted = errors.New("transport muted: the node's process died")

func (m *muteTransport) mute() { m.muted.Store(true) }

func (m *muteTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	if m.muted.Load() {
		return errMuted
	}
	return m.Transport.Call(ctx, addr, sp, sm, args, reply)
}

func (m *muteTransport) Cast(ctx context.Context, addr, sp, sm string, args any) error {
	if m.muted.Load() {
		return errMuted
	}
	return m.Transport.Cast(ctx, addr, sp, sm, args)
}

// Go starts a call like the transport it wraps (which must have Go), so
// that the node sends its one-way messages as it would without the wrap.
func (m *muteTransport) Go(ctx context.Context, addr, sp, sm string, args, reply any, done chan *client.Call) *client.Call {
	if m.muted.Load() {
		call := &client.Call{ServicePath: sp, ServiceMethod: sm, Args: args, Reply: reply, Error: errMuted, Done: done}
		done <- call
		return call
	}
	return m.Transport.(asyncTransport).Go(ctx, addr, sp, sm, args, reply, done)
}

// freeOn reports whether key is neither held nor waited for on n.
func freeOn(n *Node, key string) bool {
	_, h, q := n.table.snapshot(key)
	return h == 0 && q == 0
}

// serveAt serves s on addr and returns the address it listens on.
func serveAt(s *server.Server, addr string) (string, func(), error) {
	errc := make(chan error, 1)
	go func() { errc <- s.Serve("tcp", addr) }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		select {
		case err := <-errc:
			return "", nil, err
		default:
		}
		if time.Now().After(deadline) {
			return "", nil, errors.New("server did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return s.Address().(*net.TCPAddr).String(), func() { s.Close() }, nil
}

// servePair starts two nodes, over plain rpcx when plain is set.
func servePair(t testing.TB, plain bool) (*Node, *Node) {
	t.Helper()
	return servePairTimeout(t, plain, 0)
}

// servePairTimeout is servePair with Config.NodeTimeout set.
func servePairTimeout(t testing.TB, plain bool, nodeTimeout time.Duration) (*Node, *Node) {
	t.Helper()
	var out [2]*Node
	for i := range out {
		n, kill, err := startNodeTimeout("127.0.0.1:0", plain, nodeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kill)
		out[i] = n
	}
	// At the end both nodes close gracefully (their holders' last Drops
	// delivered, their goroutines joined) before either dies: rpcx
	// v1.9.4's client races with itself over a call in flight on a
	// connection that breaks (its reader and its sender both set the
	// call's Error), which PlainTransport's calls would otherwise meet
	// when one node's server stops under the other's last Drop.
	t.Cleanup(func() {
		out[0].Close()
		out[1].Close()
	})
	return out[0], out[1]
}
