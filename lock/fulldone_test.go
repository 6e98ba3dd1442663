package lock

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestPlainTransportGoNeverBlocksOnFullDone: PlainTransport.Go to a node
// that cannot be reached completes the call at once; with a done channel
// that has no room (or none at all) it returns, as rpcx's Go does (its
// Call.done drops a completion that finds no room, and a nil done gets a
// channel of its own). Side by side with plain rpcx's Go on a client
// whose connection is gone.
func TestPlainTransportGoNeverBlocksOnFullDone(t *testing.T) {
	s := server.NewServer()
	if err := s.RegisterName("Arith", new(testsvc.Arith), ""); err != nil {
		t.Fatal(err)
	}
	live, stop, err := testsvc.Serve(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	pc := client.NewClient(client.DefaultOption)
	if err := pc.Connect("tcp", live); err != nil {
		t.Fatal(err)
	}
	pc.Close()
	opt := client.DefaultOption
	opt.ConnectTimeout = time.Second
	p := NewPlainTransport(opt)
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	full := func() chan *client.Call {
		ch := make(chan *client.Call, 1)
		ch <- &client.Call{}
		return ch
	}
	for _, c := range []struct {
		name   string
		goCall func()
	}{
		{"plain rpcx, full done", func() { pc.Go(ctx, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{}, full()) }},
		{"plain rpcx, nil done", func() { pc.Go(ctx, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{}, nil) }},
		{"PlainTransport, full done", func() { p.Go(ctx, dead, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{}, full()) }},
		{"PlainTransport, nil done", func() { p.Go(ctx, dead, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{}, nil) }},
	} {
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			c.goCall()
		}()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Go blocked its caller", c.name)
		}
	}
}
