package plugin_test

import (
	"context"
	"fmt"
	"log"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/plugin"
)

// printRegistry stands in for an rpcx register plugin (etcd, consul, ...):
// it prints what it would publish.
type printRegistry struct{}

// Register prints the service and its metadata.
func (printRegistry) Register(name string, _ any, metadata string) error {
	fmt.Printf("publish %s: %s\n", name, metadata)
	return nil
}

// Unregister does nothing.
func (printRegistry) Unregister(string) error { return nil }

// Echo is a service to publish.
type Echo struct{}

// Say returns its argument.
func (Echo) Say(_ context.Context, in *string, out *string) error {
	*out = *in
	return nil
}

// Advertise wraps the server's register plugin, so that every service it
// publishes tells clients, in its metadata, that the server is a batch
// peer and how many lanes it takes: the drop-in XClient then dials lanes
// without a probe.
func ExampleAdvertise() {
	s := server.NewServer()
	p, err := batchserver.New(s, batchserver.WithPoolSize(8))
	if err != nil {
		log.Fatal(err)
	}
	s.Plugins.Add(plugin.Advertise(printRegistry{}, p))
	if err := s.RegisterName("Echo", Echo{}, "group=blue"); err != nil {
		log.Fatal(err)
	}
	// Output: publish Echo: group=blue&rpcxbatch=1&rpcxbatch_pool=8
}
