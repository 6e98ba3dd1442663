//go:build linux

package batchclient_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/synstall"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// gatedListener hands its first n connections to the server and then
// accepts no more, so the kernel's accept queue fills up.
type gatedListener struct {
	net.Listener
	mu       sync.Mutex
	left     int
	accepted []net.Conn
	closed   chan struct{}
	once     sync.Once
}

func (g *gatedListener) Accept() (net.Conn, error) {
	g.mu.Lock()
	ok := g.left > 0
	g.left--
	g.mu.Unlock()
	if !ok {
		<-g.closed
		return nil, net.ErrClosed
	}
	c, err := g.Listener.Accept()
	if err == nil {
		g.mu.Lock()
		g.accepted = append(g.accepted, c)
		g.mu.Unlock()
	}
	return c, err
}

// dropAccepted closes the connections the server took.
func (g *gatedListener) dropAccepted() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.accepted {
		c.Close()
	}
}

func (g *gatedListener) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// startSYNDroppingPlainServer serves Arith over plain rpcx, answers the
// lane handshake of one client (so it knows the server is plain), and then
// drops every SYN.
func startSYNDroppingPlainServer(t *testing.T) string {
	t.Helper()
	ln := &gatedListener{Listener: synstall.Listener(t), left: 1, closed: make(chan struct{})}
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	go s.ServeListener("tcp", ln)
	t.Cleanup(func() { s.Close(); ln.Close() })
	addr := ln.Addr().String()
	synDropping.Store(addr, ln)
	t.Cleanup(func() { synDropping.Delete(addr) })
	return addr
}

// synDropping holds the listener of each startSYNDroppingPlainServer
// address.
var synDropping sync.Map

// plainPeer returns a client that has found addr plain (its handshake was
// answered, and the accept queue is full since) and whose plain client
// has lost the connection it had: the handshake's, which it took over.
// Its next call dials, and the dial hangs.
func plainPeer(t *testing.T, addr string, opts ...batchclient.Option) *batchclient.Client {
	t.Helper()
	c, err := batchclient.New(opts...)
	require.NoError(t, err)
	require.NoError(t, c.Start(addr))
	deadline := time.Now().Add(10 * time.Second)
	for !c.Info(addr).Plain {
		require.True(t, time.Now().Before(deadline), "not found plain: %+v", c.Info(addr))
		time.Sleep(5 * time.Millisecond)
	}
	synstall.Fill(t, addr)
	ln, _ := synDropping.Load(addr)
	ln.(*gatedListener).dropAccepted()
	// Until the plain client has seen its connection end, a call fails
	// on it at once; then it waits for the dial.
	for {
		require.True(t, time.Now().Before(deadline), "the plain connection did not end")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return c
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Calls over the plain fallback each return by their own deadline while
// the server's address drops SYNs: none waits for another's dial, nor for
// rpcx's ConnectTimeout.
func TestPlainDialHonoursCallerDeadline(t *testing.T) {
	addr := startSYNDroppingPlainServer(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 2 * time.Second
	c := plainPeer(t, addr, batchclient.WithRPCXOption(opt))
	defer c.Close()

	const calls = 4
	took := make([]time.Duration, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			errs[i] = c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i := range calls {
		require.ErrorIs(t, errs[i], context.DeadlineExceeded, "call %d", i)
		// 100 ms deadline; the margin is for a busy 2-core machine.
		require.Less(t, took[i], 900*time.Millisecond, "call %d returned after %v (all: %v)", i, took[i], took)
	}
}

// Stop and Close do not wait for a plain dial under way.
func TestPlainDialDoesNotHoldUpStop(t *testing.T) {
	addr := startSYNDroppingPlainServer(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 8 * time.Second
	c := plainPeer(t, addr, batchclient.WithRPCXOption(opt))

	returned := make(chan error, 1)
	go func() {
		returned <- c.Call(ctxT(t, 30*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
	}()
	time.Sleep(200 * time.Millisecond) // let the call start its dial
	start := time.Now()
	c.Stop(addr)
	require.Less(t, time.Since(start), 2*time.Second, "Stop waited for the dial")
	select {
	case err := <-returned:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the call waiting for the dial did not return after Stop")
	}
	start = time.Now()
	require.NoError(t, c.Close())
	require.Less(t, time.Since(start), 2*time.Second, "Close waited")
}

// Stop interrupts a lane handshake under way: a server that accepts and
// never answers does not hold Stop for DialTimeout.
func TestStopInterruptsHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- conn
		}
	}()
	defer func() {
		for {
			select {
			case conn := <-accepted:
				conn.Close()
			default:
				return
			}
		}
	}()
	c, err := batchclient.New(batchclient.WithDialTimeout(8 * time.Second))
	require.NoError(t, err)
	defer c.Close()
	addr := ln.Addr().String()
	require.NoError(t, c.Start(addr))
	var conn net.Conn
	select {
	case conn = <-accepted:
		accepted <- conn // closed by the deferred drain
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not dial")
	}
	time.Sleep(100 * time.Millisecond) // the handshake is under way
	start := time.Now()
	c.Stop(addr)
	require.Less(t, time.Since(start), 2*time.Second, "Stop waited for the handshake")
}

// A call to a stopped address goes over a plain rpcx client made on first
// use; its connect, too, ends with the caller's context, not with rpcx's
// ConnectTimeout.
func TestStoppedAddressDialHonoursCallerDeadline(t *testing.T) {
	addr := startSYNDroppingPlainServer(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 3 * time.Second
	c := plainPeer(t, addr, batchclient.WithRPCXOption(opt))
	defer c.Close()
	c.Stop(addr)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{})
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// 100 ms deadline against a 3 s ConnectTimeout; margin for a busy machine.
	require.Less(t, took, 1500*time.Millisecond, "the call returned after %v", took)
}
