// Command group shows the group calls of package group on loopback, with
// no external service: three batch servers that succeed, reject and panic,
// a plain rpcx server that succeeds, an address with nothing listening,
// and a local node served in-process. Each policy is called once and its
// result printed.
//
//	go run ./example/group
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
)

// Args is Status.Get's argument: it needs none, but an rpcx method takes
// one.
type Args struct{}

// Status is a service whose answer depends on the server it runs on.
type Status struct {
	name string
	mode string // "ok", "reject" or "panic"
}

// Get returns the server's name, rejects, or panics.
func (s *Status) Get(_ context.Context, _ *Args, reply *string) error {
	switch s.mode {
	case "reject":
		return errors.New("not ready")
	case "panic":
		panic("out of cheese")
	}
	*reply = s.name
	return nil
}

func main() {
	rlog.SetDummyLogger() // rpcx logs connection closes and panics
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// serve starts a server running Status in mode, with the batch plugin when
// batch is set.
func serve(name, mode string, batch bool) (string, func(), error) {
	s := server.NewServer()
	if batch {
		if _, err := batchserver.New(s); err != nil {
			return "", nil, err
		}
	}
	if err := s.RegisterName("Status", &Status{name: name, mode: mode}, ""); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go s.ServeListener("tcp", ln)
	return ln.Addr().String(), func() { s.Close() }, nil
}

func run() error {
	addrs := map[string]string{}
	for _, n := range []struct{ name, mode string }{{"ok", "ok"}, {"reject", "reject"}, {"panic", "panic"}, {"plain", "ok"}, {"local", "ok"}} {
		addr, stop, err := serve(n.name, n.mode, n.name != "plain")
		if err != nil {
			return err
		}
		defer stop()
		addrs[n.name] = addr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addrs["missing"] = l.Addr().String()
	l.Close()
	for _, n := range []string{"ok", "reject", "panic", "plain", "missing", "local"} {
		fmt.Printf("%-8s %s\n", n, addrs[n])
	}
	name := map[string]string{}
	for n, a := range addrs {
		name[a] = n
	}

	bc, err := batchclient.New(batchclient.WithDialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer bc.Close()
	// The "local" server's address is the local node: calls to it run
	// in-process on this Status value, not over the network.
	g, err := group.New(bc,
		group.WithNodes(addrs["ok"], addrs["reject"], addrs["panic"], addrs["plain"], addrs["missing"]),
		group.WithLocal(addrs["local"], map[string]any{"Status": &Status{name: "local (in-process)", mode: "ok"}}))
	if err != nil {
		return err
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := &Args{}
	withLocal := group.On(append(g.Nodes(), addrs["local"])...)
	good := group.On(addrs["ok"], addrs["plain"], addrs["missing"])

	fmt.Println("\nCallOne over the failing nodes (reject, panic, missing):")
	_, err = group.CallOne[string](ctx, g, "Status", "Get", args, group.On(addrs["reject"], addrs["panic"], addrs["missing"]))
	report(name, err)
	fmt.Println("  same, with Unreachable(true):")
	_, err = group.CallOne[string](ctx, g, "Status", "Get", args, group.On(addrs["reject"], addrs["panic"], addrs["missing"]), group.Unreachable(true))
	report(name, err)

	fmt.Println("\nCallOne over every node (the local one is tried first):")
	r, err := group.CallOne[string](ctx, g, "Status", "Get", args, withLocal)
	printOne(name, r, err)

	fmt.Println("\nCallAny over the remote nodes (first success wins):")
	r, err = group.CallAny[string](ctx, g, "Status", "Get", args)
	printOne(name, r, err)

	fmt.Println("\nCallAll over every node (the first rejection ends it):")
	rs, err := group.CallAll[string](ctx, g, "Status", "Get", args)
	printAll(name, rs, err)
	fmt.Println("  over ok, plain and missing (missing is skipped):")
	rs, err = group.CallAll[string](ctx, g, "Status", "Get", args, good)
	printAll(name, rs, err)
	fmt.Println("  same, with Unreachable(true):")
	rs, err = group.CallAll[string](ctx, g, "Status", "Get", args, good, group.Unreachable(true))
	printAll(name, rs, err)

	fmt.Println("\nCallAllWait over every node and the local one (never fails):")
	rs, errs := group.CallAllWait[string](ctx, g, "Status", "Get", args, withLocal)
	printAll(name, rs, nil)
	for _, e := range errs {
		fmt.Printf("  failed  %-8s %s\n", name[e.Node], kind(e))
	}

	fmt.Println("\nCastOne and CastAll (return at once; what the casts do later is not reported):")
	fmt.Printf("  CastOne: %v\n", group.CastOne(ctx, g, "Status", "Get", args, withLocal))
	fmt.Printf("  CastAll: %v\n", group.CastAll(ctx, g, "Status", "Get", args, withLocal))
	return nil
}

func printOne(name map[string]string, r group.Result[string], err error) {
	if err != nil {
		report(name, err)
		return
	}
	fmt.Printf("  ok      %-8s %q\n", name[r.Node], r.Value)
}

func printAll(name map[string]string, rs []group.Result[string], err error) {
	if err != nil {
		report(name, err)
		return
	}
	for _, r := range rs {
		fmt.Printf("  ok      %-8s %q\n", name[r.Node], r.Value)
	}
}

// report prints a policy's error, node by node.
func report(name map[string]string, err error) {
	var rej group.Rejections
	var ne *group.NodeError
	switch {
	case errors.As(err, &rej):
		fmt.Printf("  error: Rejections with %d entries\n", len(rej))
		for _, e := range rej {
			fmt.Printf("  failed  %-8s %s\n", name[e.Node], kind(e))
		}
	case errors.As(err, &ne):
		fmt.Printf("  error   %-8s %s\n", name[ne.Node], kind(ne))
	default:
		fmt.Printf("  error: %v\n", err)
	}
}

// kind names a node error's kind and cause.
func kind(e *group.NodeError) string {
	switch {
	case errors.Is(e, group.ErrPanic):
		var pe *group.PanicError
		errors.As(e, &pe)
		return fmt.Sprintf("panic       %.100s", fmt.Sprint(pe.Value))
	case errors.Is(e, group.ErrRejected):
		return fmt.Sprintf("rejected    %v", e.Err)
	default:
		return fmt.Sprintf("unreachable %.100v", e.Err)
	}
}
