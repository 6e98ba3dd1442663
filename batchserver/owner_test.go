package batchserver_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// stacksWith returns the goroutine stacks that contain any of funcs.
func stacksWith(funcs ...string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, f := range funcs {
			if strings.Contains(g, f) {
				found = append(found, g)
				break
			}
		}
	}
	return found
}

// requireNoStacks fails t unless, within a second, no goroutine's stack
// holds any of funcs. A goroutine that an owner has joined may still be on
// its way out (past its WaitGroup's Done, runnable at its function's end)
// when the owner returns; a goroutine left running stays, and is caught.
func requireNoStacks(t *testing.T, msg string, funcs ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left := stacksWith(funcs...)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			require.Empty(t, left, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Plugin.Close joins the plugin's per-connection goroutines (reply
// writers, send queues) and Client.Close its lanes' and peers': once each
// returns, after load with calls and a send in flight, none is left.
func TestCloseJoinsGoroutines(t *testing.T) {
	s, p := newServer(t)
	addr := serve(t, s)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	// A failure before the end must not leave the send handler blocked
	// for the tests after this one.
	t.Cleanup(free)
	started := make(chan struct{}, 1)
	require.NoError(t, p.HandleSend("hold", func(context.Context, []byte) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
	}))
	c, err := batchclient.New()
	require.NoError(t, err)
	waitConnected(t, c, addr)

	// Load: calls, casts and a send that holds its send queue.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Send(ctx, addr, "hold", []byte("x")))
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the send handler did not start")
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var r testsvc.Reply
				c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: w, B: i}, &r)
				c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: w, B: i})
			}
		}()
	}
	wg.Wait()
	inFlight := make([]chan error, 0, 100)
	for i := range 100 {
		done := make(chan error, 1)
		go func() {
			var r testsvc.Reply
			done <- c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r)
		}()
		inFlight = append(inFlight, done)
	}

	require.NoError(t, c.Close())
	for _, done := range inFlight {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a call in flight did not return after Client.Close")
		}
	}
	requireNoStacks(t, "client goroutines left after Client.Close",
		"batchclient.(*lane).", "batchclient.(*peer).run", "batchclient.(*peer).dialPlain")

	s.Close()
	// The held send runs until released; Close waits for it.
	time.AfterFunc(300*time.Millisecond, free)
	start := time.Now()
	require.NoError(t, p.Close())
	require.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "Close did not wait for the running send")
	requireNoStacks(t, "plugin goroutines left after Plugin.Close",
		"batchserver.(*conn).writeReplies", "batchserver.(*conn).runSends")
}

// With a user pool, Plugin.Close also joins the pool's feeder and pinger
// (they run while the plugin has connections) and a drain's watcher: once
// it returns after Shutdown, none is left.
func TestCloseJoinsPoolGoroutines(t *testing.T) {
	s := server.NewServer(server.WithPool(2, 100))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	addr := serve(t, s)
	c, err := batchclient.New()
	require.NoError(t, err)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				var r testsvc.Reply
				require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: w, B: i}, &r))
				c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: w, B: i})
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, stacksWith("batchserver.(*poolPinger).run"), "precondition: the pool's pinger runs")
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, c.Close())
	require.NoError(t, p.Close())
	requireNoStacks(t, "plugin goroutines left after Plugin.Close",
		"batchserver.(*poolPinger).run", "batchserver.(*poolFeeder).feed",
		"batchserver.(*Plugin).watchIdle", "batchserver.(*Plugin).waitIdle")
}

var _ = batchserver.ErrSendHandlerExists
