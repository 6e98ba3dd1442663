// Command push shows rpcx's bidirectional mode over rpcxbatch on loopback:
// a handler pushes messages to its caller with Server.SendMessage while it
// answers, and a bidirectional XClient receives them on its channel, from a
// server with the batch plugin (over a lane) and from a plain rpcx server
// (over rpcx's own connection) alike.
//
//	go run ./example/push
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/smallnest/rpcx/client"
	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

func main() {
	rlog.SetDummyLogger() // rpcx logs every connection close at INFO
	for _, batch := range []bool{true, false} {
		if err := run(batch); err != nil {
			log.Fatal(err)
		}
	}
}

// run serves testsvc.Pusher, whose Push method pushes args.N messages to
// the connection its call came in on, then calls it once.
func run(batch bool) error {
	s := server.NewServer()
	if batch {
		if _, err := batchserver.New(s); err != nil {
			return err
		}
	}
	if err := s.RegisterName("Pusher", &testsvc.Pusher{S: s}, ""); err != nil {
		return err
	}
	addr, stop, err := testsvc.Serve(s)
	if err != nil {
		return err
	}
	defer stop()

	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	if err != nil {
		return err
	}
	ch := make(chan *protocol.Message, 16)
	// client.NewBidirectionalXClient's arguments, unchanged.
	xc := batchclient.NewBidirectionalXClient("Pusher", client.Failtry, client.RandomSelect, d, client.DefaultOption, ch)
	defer xc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var reply testsvc.PushReply
	if err := xc.Call(ctx, "Push", &testsvc.PushArgs{N: 3, Tag: "hello"}, &reply); err != nil {
		return err
	}
	fmt.Printf("server with batch plugin: %v; reply %+v\n", batch, reply)
	for i := 0; i < reply.N; i++ {
		select {
		case m := <-ch:
			fmt.Printf("  pushed: %s.%s %v %q\n", m.ServicePath, m.ServiceMethod, m.Metadata, m.Payload)
		case <-ctx.Done():
			return fmt.Errorf("push %d: %w", i, ctx.Err())
		}
	}
	return nil
}
