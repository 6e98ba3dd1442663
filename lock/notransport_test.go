package lock

import (
	"context"
	"errors"
	"testing"

	"github.com/smallnest/rpcx/server"
)

// A node with a Server but no Transport would serve other nodes' holders
// without being able to answer their waiting requests or to watch their
// nodes: when such a holder's node died, its locks here were held for
// good. New refuses that Config.
func TestServerWithoutTransportIsRefused(t *testing.T) {
	n, err := New(Config{Server: server.NewServer(), Addr: "127.0.0.1:1"})
	if err == nil {
		n.Close()
		t.Fatal("New accepted a Config with a Server and no Transport")
	}
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("New: %v, want ErrConfig", err)
	}
}

// A node with no Server cannot be answered nor watched by the other
// nodes: its holders' requests on other nodes are refused with ErrConfig.
func TestLockOnFromNodeWithoutServerIsRefused(t *testing.T) {
	b := serveNode(t)
	a := localNode(t)
	h, err := a.NewHolder(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.LockOn(context.Background(), []string{b.Addr()}, Exclusive, "k"); !errors.Is(err, ErrConfig) {
		t.Fatalf("LockOn from a node with no Server: %v, want ErrConfig", err)
	}
}
