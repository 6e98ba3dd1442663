package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxio/rpcx-etcd/serverplugin"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/plugin"
)

// The servers of the example: the service they run and how one is started
// and stopped (main.go drives them).

// Args is the argument of Arith's methods.
type Args struct {
	A, B int
}

// Reply is Arith.Mul's result.
type Reply struct {
	C int
}

// Arith is the service every server runs: Mul, counted per server, and
// Name, so that a group call shows who answered.
type Arith struct {
	name  string
	calls atomic.Int64
}

// Mul multiplies.
func (a *Arith) Mul(_ context.Context, args *Args, r *Reply) error {
	a.calls.Add(1)
	r.C = args.A * args.B
	return nil
}

// Name returns the server's name.
func (a *Arith) Name(_ context.Context, _ *Args, r *string) error {
	*r = a.name
	return nil
}

// node is one server: rpcx, optionally the batch plugin, and rpcx-etcd's
// register plugin behind plugin.Advertise.
type node struct {
	name   string
	addr   string
	srv    *server.Server
	reg    *serverplugin.EtcdV3RegisterPlugin
	batch  *batchserver.Plugin // nil for the plain server
	svc    *Arith
	served chan struct{} // closed when ServeListener returns
	once   sync.Once
}

// startNode serves Arith on a loopback port and registers it in etcd.
//
// rpcx-etcd v0.5.0 publishes a service only on its refresh tick
// (UpdateInterval) unless ServerStarted is set, in which case it publishes
// once that channel closes: so ServerStarted is closed as soon as the
// server listens. The crash-detection time is not UpdateInterval but the
// plugin's etcd lease, 30 s, kept alive in the background.
func startNode(endpoint, base, name string, batch bool) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // other machines: a routable address
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	n := &node{name: name, addr: ln.Addr().String(), srv: server.NewServer(),
		svc: &Arith{name: name}, served: make(chan struct{})}
	if batch {
		if n.batch, err = batchserver.New(n.srv); err != nil {
			ln.Close()
			return nil, fmt.Errorf("%s: batch plugin: %w", name, err)
		}
	}
	started := make(chan struct{})
	n.reg = &serverplugin.EtcdV3RegisterPlugin{
		ServiceAddress: "tcp@" + n.addr, // the address clients will dial
		EtcdServers:    []string{endpoint},
		BasePath:       base,
		UpdateInterval: time.Minute,
		ServerStarted:  started,
	}
	// The wrapper adds rpcxbatch=1&rpcxbatch_pool=N (or rpcxbatch=0 when
	// n.batch is nil) to the metadata the etcd plugin publishes.
	n.srv.Plugins.Add(plugin.Advertise(n.reg, n.batch))
	if err := n.srv.RegisterName(service, n.svc, ""); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%s: register: %w", name, err)
	}
	if err := n.reg.Start(); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%s: etcd register plugin: %w", name, err)
	}
	go func() {
		defer close(n.served)
		n.srv.ServeListener("tcp", ln)
	}()
	select {
	case <-n.srv.Started:
	case <-time.After(5 * time.Second):
		n.stop()
		return nil, fmt.Errorf("%s: server did not start", name)
	}
	close(started)
	return n, nil
}

// stop stops the server gracefully: rpcx's Shutdown deregisters every
// service first (the etcd key goes at once), finishes the requests in
// flight and closes the connections; then the etcd plugin stops.
func (n *node) stop() {
	n.once.Do(func() {
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
