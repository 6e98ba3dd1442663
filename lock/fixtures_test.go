package lock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// nodeWith starts a node like startNode but lets the test edit its Config
// (nil Transport when noTransport). It returns the node, a func that
// closes only the lock node (the rpcx server and transport stay up, as in
// an application that keeps serving other services), and a kill that stops
// everything without a word to the other nodes.
func nodeWith(t testing.TB, noTransport bool, edit func(*Config)) (n *Node, closeNode func(), kill func()) {
	t.Helper()
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := serveAt(s, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Server: s, Addr: addr}
	var bc *batchclient.Client
	var mute *muteTransport
	if !noTransport {
		if bc, err = batchclient.New(); err != nil {
			t.Fatal(err)
		}
		mute = &muteTransport{Transport: bc}
		cfg.Transport = mute
	}
	if edit != nil {
		edit(&cfg)
	}
	n, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			// Silent first, as when the process dies: the node's Close
			// can then tell the other nodes nothing.
			if mute != nil {
				mute.mute()
			}
			stop()
			n.Close()
			if bc != nil {
				bc.Close()
			}
		})
	}
	t.Cleanup(kill)
	return n, func() { n.Close() }, kill
}

func proxyCount(n *Node) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.proxies)
}

func testHolder(t testing.TB, n *Node) *Holder {
	t.Helper()
	h, err := n.NewHolder(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// lockOnAsync runs h.LockOn in a goroutine.
func lockOnAsync(ctx context.Context, h *Holder, nodes []string, mode Mode, keys ...string) chan error {
	ch := make(chan error, 1)
	go func() { ch <- h.LockOn(ctx, nodes, mode, keys...) }()
	return ch
}

func queuedAtLeast(n *Node, key string, want int) func() bool {
	return func() bool { _, _, q := n.table.snapshot(key); return q >= want }
}

var _ = time.Second
