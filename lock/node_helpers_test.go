package lock

import (
	"testing"

	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testsvc"
)

func init() { rlog.SetDummyLogger() }

// serveNode starts an rpcx server with the batch plugin on loopback and a
// lock node on it that reaches the others over its own batchclient.
func serveNode(t testing.TB) *Node {
	t.Helper()
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := testsvc.Serve(s)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := batchclient.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Server: s, Addr: addr, Transport: bc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Close()
		bc.Close()
		stop()
	})
	return n
}

// freeOn reports whether key is neither held nor waited for on n.
func freeOn(n *Node, key string) bool {
	_, h, q := n.table.snapshot(key)
	return h == 0 && q == 0
}
