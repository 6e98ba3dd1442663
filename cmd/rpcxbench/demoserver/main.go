// Command demoserver is a small rpcx service to point rpcxbench at: its
// types are its own, as a user's service's are, and rpcxbench knows none
// of them. It serves
//
//	Shop.Order  struct arguments: {"Item": "tea", "Qty": 3, "Price": 2.5, "Tags": ["green"]}
//	Shop.Slow   takes {"MS": 20} milliseconds to answer
//	Shop.Flaky  Shop.Order, but every third call fails
//	Blob.Echo   a []byte, returned as it came
//
// on a loopback port, with the rpcxbatch plugin when -plugin is set and
// plain rpcx otherwise, registered in etcd when -etcd is set (through
// plugin.Advertise, so that the registry says whether it has the plugin).
// It prints "READY host:port" on stdout once it serves, and runs until its
// stdin closes (unless -stdin=false), or SIGINT or SIGTERM.
//
//	go run ./cmd/rpcxbench/demoserver -plugin -addr 127.0.0.1:8972
//	go run ./cmd/rpcxbench -addr 127.0.0.1:8972 -call Shop.Order -args '{"Item":"tea","Qty":3,"Price":2.5}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rpcxio/rpcx-etcd/serverplugin"
	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/plugin"
)

// OrderArgs is Shop.Order's argument: field names as msgpack and JSON
// carry them (Go's, as no tag renames them).
type OrderArgs struct {
	Item  string
	Qty   int
	Price float64
	Tags  []string
}

// OrderReply is Shop.Order's reply.
type OrderReply struct {
	Item  string
	Total float64
	Tags  int
}

// SlowArgs is Shop.Slow's argument: how long the call takes.
type SlowArgs struct{ MS int }

// SlowReply is Shop.Slow's reply: how long it took.
type SlowReply struct{ TookMS int }

// Shop is the service with struct arguments.
type Shop struct {
	flaky *atomic.Int64 // Flaky's calls so far
}

// Order prices an order; a quantity below 1 is the caller's error.
func (Shop) Order(_ context.Context, a *OrderArgs, r *OrderReply) error {
	if a.Qty < 1 {
		return fmt.Errorf("order of %d %q: the quantity must be at least 1", a.Qty, a.Item)
	}
	*r = OrderReply{Item: a.Item, Total: float64(a.Qty) * a.Price, Tags: len(a.Tags)}
	return nil
}

// Flaky is Order, but its third, sixth, ... call fails: errors for the
// tool's table to count.
func (s Shop) Flaky(ctx context.Context, a *OrderArgs, r *OrderReply) error {
	if n := s.flaky.Add(1); n%3 == 0 {
		return fmt.Errorf("flaky: call %d fails, as every third does", n)
	}
	return s.Order(ctx, a, r)
}

// Slow answers after a.MS milliseconds, or when the call's context ends.
func (Shop) Slow(ctx context.Context, a *SlowArgs, r *SlowReply) error {
	t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.TookMS = int(time.Since(start).Milliseconds())
	return nil
}

// Blob is the service with a []byte argument.
type Blob struct{}

// Echo returns its argument.
func (Blob) Echo(_ context.Context, a *[]byte, r *[]byte) error {
	*r = *a
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to serve on (port 0: a free one)")
	withPlugin := flag.Bool("plugin", false, "serve with the rpcxbatch plugin (batchserver.New)")
	etcd := flag.String("etcd", "", "etcd endpoints, comma-separated: register Shop and Blob there")
	base := flag.String("base-path", "/rpcx", "rpcx base path in etcd")
	stdin := flag.Bool("stdin", true, "stop when stdin closes (false: only at SIGINT or SIGTERM)")
	flag.Parse()
	rlog.SetDummyLogger()
	if err := serve(*addr, *withPlugin, *etcd, *base, *stdin); err != nil {
		fmt.Fprintln(os.Stderr, "demoserver:", err)
		os.Exit(1)
	}
}

func serve(addr string, withPlugin bool, etcd, base string, watchStdin bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := server.NewServer()
	var p *batchserver.Plugin
	if withPlugin {
		if p, err = batchserver.New(s); err != nil {
			ln.Close()
			return fmt.Errorf("batch plugin: %w", err)
		}
	}
	// rpcx-etcd v0.5.0's Register writes the paths of the service
	// registered before it (and, with ServerStarted set, every pending
	// write takes the last service's): so the registrations are written as
	// they are made, and the last service is registered with etcd once
	// more, through the same wrapper, to write its own.
	var adv *plugin.Advertiser
	var reg *serverplugin.EtcdV3RegisterPlugin
	if etcd != "" {
		reg = &serverplugin.EtcdV3RegisterPlugin{
			ServiceAddress: "tcp@" + ln.Addr().String(),
			EtcdServers:    strings.Split(etcd, ","),
			BasePath:       base,
			UpdateInterval: time.Minute,
		}
		adv = plugin.Advertise(reg, p)
		s.Plugins.Add(adv)
	}
	if err := s.RegisterName("Shop", Shop{flaky: new(atomic.Int64)}, ""); err != nil {
		ln.Close()
		return err
	}
	if err := s.RegisterName("Blob", Blob{}, ""); err != nil {
		ln.Close()
		return err
	}
	if reg != nil {
		if err := adv.Register("Blob", Blob{}, ""); err != nil {
			ln.Close()
			return fmt.Errorf("etcd: %w", err)
		}
		if err := reg.Start(); err != nil {
			ln.Close()
			return fmt.Errorf("etcd register plugin: %w", err)
		}
		defer reg.Stop()
	}
	served := make(chan error, 1)
	go func() { served <- s.ServeListener("tcp", ln) }()
	select {
	case <-s.Started:
	case err := <-served:
		return err
	case <-time.After(5 * time.Second):
		s.Close()
		return errors.New("server did not start")
	}
	fmt.Println("READY", ln.Addr().String())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	eof := make(chan struct{})
	if watchStdin {
		go func() { // ends with the process: it blocks on stdin until EOF
			io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
	}
	select {
	case <-sig:
	case <-eof:
	case err := <-served:
		return err
	}
	// Shutdown deregisters from etcd first, then lets calls in flight end.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}
