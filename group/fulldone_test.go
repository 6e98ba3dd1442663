package group_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestPlainCallerGoNeverBlocksOnFullDone: PlainCaller.Go to a node that
// cannot be reached completes the call at once; with a done channel that
// has no room it drops the completion, as rpcx's Call.done does, and
// returns. Side by side with plain rpcx's Go on a client whose
// connection is gone.
func TestPlainCallerGoNeverBlocksOnFullDone(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	live, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())

	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", live))
	pc.Close()
	opt := client.DefaultOption
	opt.ConnectTimeout = time.Second
	p := group.NewPlainCaller(opt)
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	full := func() chan *client.Call {
		ch := make(chan *client.Call, 1)
		ch <- &client.Call{}
		return ch
	}
	for name, goCall := range map[string]func(){
		"plain rpcx":  func() { pc.Go(ctx, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{}, full()) },
		"PlainCaller": func() { p.Go(ctx, dead, "Arith", "Mul", &testsvc.Args{}, &testsvc.Reply{}, full()) },
	} {
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			goCall()
		}()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Go blocked its caller on a full done channel", name)
		}
	}
}
