package batchclient_test

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

// Arith is an rpcx service, registered as every rpcx service is.
type Arith struct{}

// MulArgs are Mul's arguments.
type MulArgs struct{ A, B int }

// MulReply is Mul's result.
type MulReply struct{ C int }

// Mul multiplies.
func (Arith) Mul(_ context.Context, a *MulArgs, r *MulReply) error {
	r.C = a.A * a.B
	return nil
}

// exampleServer serves Arith with the batch plugin on a free loopback port
// and returns its address and a stop.
func exampleServer() (string, func()) {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil { // the one line a server adds
		log.Fatal(err)
	}
	if err := s.RegisterName("Arith", Arith{}, ""); err != nil {
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

// A service switches over by adding batchserver.New to its server and
// making its XClients with batchclient.NewXClient, which takes rpcx's own
// arguments: call sites do not change.
func ExampleNewXClient() {
	addr, stop := exampleServer()
	defer stop()

	disc, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	if err != nil {
		log.Fatal(err)
	}
	xc := batchclient.NewXClient("Arith", client.Failtry, client.RandomSelect, disc, client.DefaultOption)
	defer xc.Close()

	var r MulReply
	if err := xc.Call(context.Background(), "Mul", &MulArgs{A: 6, B: 7}, &r); err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.C)
	// Output: 42
}

// The direct Client addresses servers by host:port: Call waits for the
// reply, Go returns rpcx's *client.Call at once, Cast runs a method without
// a reply. Each goes over the server's lanes when it has the batch plugin,
// over plain rpcx otherwise.
func ExampleClient_Call() {
	addr, stop := exampleServer()
	defer stop()

	c, err := batchclient.New()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var r MulReply
	if err := c.Call(ctx, addr, "Arith", "Mul", &MulArgs{A: 6, B: 7}, &r); err != nil {
		log.Fatal(err)
	}
	fmt.Println("Call:", r.C)

	var r2 MulReply
	call := <-c.Go(ctx, addr, "Arith", "Mul", &MulArgs{A: 2, B: 3}, &r2, nil).Done
	fmt.Println("Go:", r2.C, call.Error)

	fmt.Println("Cast:", c.Cast(ctx, addr, "Arith", "Mul", &MulArgs{A: 1, B: 1}))
	in := c.Info(addr)
	fmt.Println(in.Status, in.Lanes)
	// Output:
	// Call: 42
	// Go: 6 <nil>
	// Cast: <nil>
	// connected 1
}

// Send delivers bytes to a send handler registered on the server with
// batchserver's HandleSend; sends made under one WithKey key arrive in the
// order they were made.
func ExampleClient_Send() {
	s := server.NewServer()
	p, err := batchserver.New(s)
	if err != nil {
		log.Fatal(err)
	}
	got := make(chan string, 3)
	if err := p.HandleSend("events", func(_ context.Context, payload []byte) {
		got <- string(payload)
	}); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go s.Serve("tcp", addr)
	defer s.Close()
	for s.Address() == nil {
		time.Sleep(time.Millisecond)
	}

	c, err := batchclient.New()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := batchclient.WithKey(context.Background(), "user-42")
	for _, ev := range []string{"created", "paid", "shipped"} {
		if err := c.Send(ctx, addr, "events", []byte(ev)); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		fmt.Println(<-got)
	}
	// Output:
	// created
	// paid
	// shipped
}
