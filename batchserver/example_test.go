package batchserver_test

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
)

// Greeter is an rpcx service, registered as every rpcx service is.
type Greeter struct{}

// Hello greets *name.
func (Greeter) Hello(_ context.Context, name *string, reply *string) error {
	*reply = "hello, " + *name
	return nil
}

// serveExample serves s on a free loopback port and returns its address.
func serveExample(s *server.Server) string {
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
	return addr
}

// The plugin is one line on an rpcx server: services are registered as
// before, batch clients get lanes, and plain rpcx clients keep working on
// the same port.
func ExampleNew() {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		log.Fatal(err)
	}
	if err := s.RegisterName("Greeter", Greeter{}, ""); err != nil {
		log.Fatal(err)
	}
	addr := serveExample(s)
	defer s.Close()
	ctx := context.Background()
	name := "batch"

	bc, err := batchclient.New()
	if err != nil {
		log.Fatal(err)
	}
	defer bc.Close()
	var reply string
	if err := bc.Call(ctx, addr, "Greeter", "Hello", &name, &reply); err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply, "over", bc.Info(addr).Status)

	pc := client.NewClient(client.DefaultOption)
	if err := pc.Connect("tcp", addr); err != nil {
		log.Fatal(err)
	}
	defer pc.Close()
	name = "plain"
	if err := pc.Call(ctx, "Greeter", "Hello", &name, &reply); err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply, "over rpcx")
	// Output:
	// hello, batch over connected
	// hello, plain over rpcx
}

// A send handler gets the bytes of batchclient's Send, one send after
// another in the order each lane wrote them.
func ExamplePlugin_HandleSend() {
	s := server.NewServer()
	p, err := batchserver.New(s, batchserver.WithPoolSize(4)) // a 4-core machine's lanes, at most
	if err != nil {
		log.Fatal(err)
	}
	got := make(chan []byte, 1)
	if err := p.HandleSend("audit", func(_ context.Context, payload []byte) {
		got <- payload
	}); err != nil {
		log.Fatal(err)
	}
	addr := serveExample(s)
	defer s.Close()

	bc, err := batchclient.New()
	if err != nil {
		log.Fatal(err)
	}
	defer bc.Close()
	if err := bc.Send(context.Background(), addr, "audit", []byte("user 42 logged in")); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", <-got)
	// Output: user 42 logged in
}
