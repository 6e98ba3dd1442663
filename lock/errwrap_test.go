package lock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// A node that cannot be reached fails the request with ErrNodeLost, and
// the transport's own error stays reachable with errors.Is/As (wrapped
// with %w, not formatted with %v).
func TestNodeLostWrapsTheTransportError(t *testing.T) {
	a := serveNode(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nobody listens there any more
	h := newHolder(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = h.LockOn(ctx, []string{dead}, Exclusive, "k")
	if !errors.Is(err, ErrNodeLost) {
		t.Fatalf("LockOn on a closed port: %v, want ErrNodeLost", err)
	}
	var opErr *net.OpError
	if !errors.Is(err, batchclient.ErrPeerDown) && !errors.Is(err, batchclient.ErrConnection) && !errors.As(err, &opErr) {
		t.Fatalf("LockOn on a closed port: %v: the transport's error is not wrapped", err)
	}
}
