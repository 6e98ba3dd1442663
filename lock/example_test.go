package lock_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/lock"
)

// exampleNode starts a lock node: an rpcx server with the batch plugin
// the lock service registers on, and a batch client to reach the others.
func exampleNode() (*lock.Node, func()) {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
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
	bc, err := batchclient.New()
	if err != nil {
		log.Fatal(err)
	}
	n, err := lock.New(lock.Config{Server: s, Addr: addr, Transport: bc})
	if err != nil {
		log.Fatal(err)
	}
	return n, func() { n.Close(); bc.Close(); s.Close() }
}

// A holder on node a takes a key exclusively on both nodes; a holder on b
// waits for it until a releases. Closing a holder releases everything it
// holds, on every node.
func Example() {
	a, stopA := exampleNode()
	defer stopA()
	b, stopB := exampleNode()
	defer stopB()
	both := []string{a.Addr(), b.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ha, err := a.NewHolder(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := ha.LockOn(ctx, both, lock.Exclusive, "invoice-7"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("a holds invoice-7")

	hb, err := b.NewHolder(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer hb.Close()
	granted := make(chan error, 1)
	go func() { granted <- hb.LockOn(ctx, both, lock.Exclusive, "invoice-7") }()
	select {
	case <-granted:
		fmt.Println("b was granted too early")
	case <-time.After(100 * time.Millisecond):
		fmt.Println("b waits")
	}
	ha.Close()
	fmt.Println("b granted after a closed:", <-granted)
	// Output:
	// a holds invoice-7
	// b waits
	// b granted after a closed: <nil>
}
