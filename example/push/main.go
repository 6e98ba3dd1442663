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
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/smallnest/rpcx/client"
	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// PushArgs asks Pusher.Push for N messages tagged Tag.
type PushArgs struct {
	N   int
	Tag string
}

// PushReply is Pusher.Push's answer: how many messages it pushed.
type PushReply struct {
	N   int
	Tag string
}

// Pusher is a service that pushes messages to its caller with rpcx's
// Server.SendMessage before it answers (rpcx's bidirectional mode).
type Pusher struct {
	S *server.Server
}

// Push sends args.N messages, addressed "Pusher.Note", to the connection
// the call came in on, then answers. rpcx puts that connection in the
// handler's context, on a lane as on a plain connection.
func (p *Pusher) Push(ctx context.Context, args *PushArgs, reply *PushReply) error {
	conn, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if conn == nil {
		return errors.New("push: no connection in the context")
	}
	for i := range args.N {
		meta := map[string]string{"i": strconv.Itoa(i), "tag": args.Tag}
		payload := []byte(args.Tag + "/" + strconv.Itoa(i))
		if err := p.S.SendMessage(conn, "Pusher", "Note", meta, payload); err != nil {
			return err
		}
	}
	reply.N, reply.Tag = args.N, args.Tag
	return nil
}

func main() {
	rlog.SetDummyLogger() // rpcx logs every connection close at INFO
	for _, batch := range []bool{true, false} {
		if err := run(batch); err != nil {
			log.Fatal(err)
		}
	}
}

// run serves Pusher, whose Push method pushes args.N messages to the
// connection its call came in on, then calls it once.
func run(batch bool) error {
	s := server.NewServer()
	if batch {
		if _, err := batchserver.New(s); err != nil {
			return err
		}
	}
	if err := s.RegisterName("Pusher", &Pusher{S: s}, ""); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s.ServeListener("tcp", ln)
	defer s.Close()
	addr := ln.Addr().String()

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
	var reply PushReply
	if err := xc.Call(ctx, "Push", &PushArgs{N: 3, Tag: "hello"}, &reply); err != nil {
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
