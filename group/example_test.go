package group_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"slices"
	"time"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
)

// Status answers with its node's name, or rejects.
type Status struct {
	name   string
	reject bool
}

// Get returns the node's name; a rejecting node returns an error.
func (s *Status) Get(_ context.Context, _ *struct{}, reply *string) error {
	if s.reject {
		return errors.New("not ready")
	}
	*reply = s.name
	return nil
}

// exampleNode serves a Status named name with the batch plugin on a free
// loopback port and returns its address.
func exampleNode(name string, reject bool) (string, func()) {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		log.Fatal(err)
	}
	if err := s.RegisterName("Status", &Status{name: name, reject: reject}, ""); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go s.Serve("tcp", addr)
	for s.Address() == nil {
		time.Sleep(time.Millisecond)
	}
	return addr, func() { s.Close() }
}

// One call, several nodes, the policy chosen per call: CallAll needs
// every node, CallAllWait reports each, CallAny takes the first success.
// Every result and error names its node.
func Example() {
	a, stopA := exampleNode("a", false)
	defer stopA()
	b, stopB := exampleNode("b", false)
	defer stopB()
	c, stopC := exampleNode("c", true)
	defer stopC()
	name := map[string]string{a: "a", b: "b", c: "c"}

	bc, err := batchclient.New()
	if err != nil {
		log.Fatal(err)
	}
	defer bc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	healthy, err := group.New(bc, group.WithNodes(a, b))
	if err != nil {
		log.Fatal(err)
	}
	defer healthy.Close()
	all, err := group.CallAll[string](ctx, healthy, "Status", "Get", &struct{}{})
	var got []string
	for _, r := range all {
		got = append(got, r.Value)
	}
	slices.Sort(got)
	fmt.Println("CallAll:", got, err)

	mixed, err := group.New(bc, group.WithNodes(a, b, c))
	if err != nil {
		log.Fatal(err)
	}
	defer mixed.Close()
	ok, failed := group.CallAllWait[string](ctx, mixed, "Status", "Get", &struct{}{})
	fmt.Println("CallAllWait:", len(ok), "answered,", len(failed), "rejected:", name[failed[0].Node], errors.Is(failed[0], group.ErrRejected))

	one, err := group.CallAny[string](ctx, mixed, "Status", "Get", &struct{}{})
	fmt.Println("CallAny: a success from", name[one.Node] == one.Value, err)
	// Output:
	// CallAll: [a b] <nil>
	// CallAllWait: 2 answered, 1 rejected: c true
	// CallAny: a success from true <nil>
}
