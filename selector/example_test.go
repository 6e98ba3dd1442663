package selector_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/selector"
)

// Where answers with its server's name.
type Where struct{ name string }

// Name returns the server's name.
func (w *Where) Name(_ context.Context, _ *struct{}, reply *string) error {
	*reply = w.name
	return nil
}

// exampleServer serves a Where named name on a free loopback port.
func exampleServer(name string) (string, func()) {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		log.Fatal(err)
	}
	if err := s.RegisterName("Where", &Where{name: name}, ""); err != nil {
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

// LocalFirst is an rpcx Selector: set on an XClient (rpcx's or the
// drop-in), it sends every call to the local server while it is among the
// XClient's servers.
func ExampleNewLocalFirst() {
	here, stopHere := exampleServer("here")
	defer stopHere()
	there, stopThere := exampleServer("there")
	defer stopThere()

	disc, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + there}, {Key: "tcp@" + here}})
	if err != nil {
		log.Fatal(err)
	}
	xc := batchclient.NewXClient("Where", client.Failover, client.RandomSelect, disc, client.DefaultOption)
	defer xc.Close()
	xc.SetSelector(selector.NewLocalFirst(here))

	for range 3 {
		var name string
		if err := xc.Call(context.Background(), "Name", &struct{}{}, &name); err != nil {
			log.Fatal(err)
		}
		fmt.Println(name)
	}
	// Output:
	// here
	// here
	// here
}
