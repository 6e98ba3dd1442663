package plainconn_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

var errStopped = errors.New("test: slot stopped")

// connLog records the connections a server accepted, so a test can break
// them from the server's side.
type connLog struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connLog) HandleConnAccept(c net.Conn) (net.Conn, bool) {
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	return c, true
}

// closeAll closes every connection accepted so far.
func (l *connLog) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

func (l *connLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// serveArith starts a plain rpcx server of Arith on 127.0.0.1:0.
func serveArith(t *testing.T) (string, *connLog) {
	t.Helper()
	s := server.NewServer()
	var log connLog
	s.Plugins.Add(&log)
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	return addr, &log
}

// dialCounter makes slots that dial addr with opt and count their dials.
type dialCounter struct {
	n    atomic.Int64
	gate chan struct{} // when not nil, each dial waits for it first
	// started is told of each dial, when not nil.
	started chan struct{}
}

func (d *dialCounter) config(addr string, opt client.Option) plainconn.Config {
	return plainconn.Config{
		Addr:    addr,
		Stopped: errStopped,
		Dial: func(ctx context.Context) (*client.Client, error) {
			d.n.Add(1)
			if d.started != nil {
				d.started <- struct{}{}
			}
			if d.gate != nil {
				select {
				case <-d.gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			c := client.NewClient(opt)
			return c, plainconn.Connect(ctx, c, opt, "tcp", addr)
		},
	}
}

// mul calls Arith.Mul on c and returns the product.
func mul(t *testing.T, c *client.Client, a, b int) (int, error) {
	t.Helper()
	var r testsvc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// On Go, not Call: rpcx's Call races with its sender when ctx ends.
	call := c.Go(ctx, "Arith", "Mul", &testsvc.Args{A: a, B: b}, &r, make(chan *client.Call, 1))
	select {
	case <-call.Done:
		return r.C, call.Error
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Callers that arrive together share one dial and one client.
func TestConcurrentUsersDialOnce(t *testing.T) {
	addr, _ := serveArith(t)
	d := &dialCounter{gate: make(chan struct{}), started: make(chan struct{}, 1)}
	s := plainconn.NewSlot(d.config(addr, client.DefaultOption))
	defer s.Close()

	const users = 16
	got := make([]*client.Client, users)
	errs := make([]error, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, err := s.Use(ctxT(t, 10*time.Second))
			got[i], errs[i] = u.Client, err
			if err == nil {
				_, errs[i] = mul(t, u.Client, i, 2)
				u.Done()
			}
		}()
	}
	<-d.started
	close(d.gate) // the first dial goes on; the others joined it or come later
	wg.Wait()
	for i := range users {
		require.NoError(t, errs[i], "user %d", i)
		require.Same(t, got[0], got[i], "user %d got another client", i)
	}
	require.Equal(t, int64(1), d.n.Load(), "dials")
	require.True(t, s.CloseIdle(nil), "every use is done")
}

// A broken connection is dialled again on the next use, and the owner
// hears of it (OnRedial).
func TestBrokenConnectionRedialled(t *testing.T) {
	addr, log := serveArith(t)
	d := &dialCounter{}
	cfg := d.config(addr, client.DefaultOption)
	var redials atomic.Int64
	cfg.OnRedial = func() { redials.Add(1) }
	var installed []*client.Client
	cfg.OnInstall = func(c *client.Client) { installed = append(installed, c) } // under the slot's lock
	s := plainconn.NewSlot(cfg)
	defer s.Close()

	u, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	first := u.Client
	p, err := mul(t, first, 3, 4)
	require.NoError(t, err)
	require.Equal(t, 12, p)
	u.Done()
	require.Equal(t, int64(0), redials.Load())

	log.closeAll()
	require.Eventually(t, func() bool { return first.IsShutdown() }, 5*time.Second, time.Millisecond)

	u, err = s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	defer u.Done()
	require.NotSame(t, first, u.Client)
	require.Same(t, u.Client, s.Current())
	p, err = mul(t, u.Client, 5, 6)
	require.NoError(t, err)
	require.Equal(t, 30, p)
	require.Equal(t, int64(2), d.n.Load(), "dials")
	require.Equal(t, int64(1), redials.Load(), "redials reported")
	require.Equal(t, 2, log.count(), "connections accepted")
	s.Close()
	require.Len(t, installed, 2)
}

// Retire closes a client only once the calls using it are done; one
// nobody uses is closed at once.
func TestRetireWaitsForInUseCalls(t *testing.T) {
	addr, _ := serveArith(t)
	d := &dialCounter{}
	s := plainconn.NewSlot(d.config(addr, client.DefaultOption))
	defer s.Close()

	a, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	b, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	require.Same(t, a.Client, b.Client)
	old := a.Client

	s.Retire(old, func() bool { return false })
	require.Same(t, old, s.Current(), "keep said no: still the slot's")
	s.Retire(old, nil)
	require.Nil(t, s.Current())
	require.False(t, s.CloseIdle(nil), "calls still use the retired client")

	a.Done()
	p, err := mul(t, old, 7, 8)
	require.NoError(t, err, "a retired client serves its calls in use")
	require.Equal(t, 56, p)
	require.False(t, old.IsClosing())

	b.Done()
	require.True(t, old.IsClosing(), "closed with its last call")

	// The next use dials a new client; retiring it unused closes it at once.
	c, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	require.NotSame(t, old, c.Client)
	c.Done()
	s.Retire(c.Client, nil)
	require.True(t, c.Client.IsClosing())
	require.Equal(t, int64(2), d.n.Load())
}

// CloseIdle refuses while a call runs and, once none does, runs its hook,
// closes the client and turns later callers away.
func TestCloseIdle(t *testing.T) {
	addr, _ := serveArith(t)
	d := &dialCounter{}
	s := plainconn.NewSlot(d.config(addr, client.DefaultOption))
	defer s.Close()
	u, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	ran := false
	require.False(t, s.CloseIdle(func() { ran = true }))
	require.False(t, ran)
	u.Done()
	require.True(t, s.CloseIdle(func() { ran = true }))
	require.True(t, ran)
	require.True(t, u.Client.IsClosing())
	_, err = s.Use(ctxT(t, 5*time.Second))
	require.ErrorIs(t, err, errStopped)
}

// Close closes the client even while calls use it, and Use then reports
// Config.Stopped; Close is idempotent.
func TestCloseClosesInUse(t *testing.T) {
	addr, _ := serveArith(t)
	d := &dialCounter{}
	s := plainconn.NewSlot(d.config(addr, client.DefaultOption))
	u, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	s.Close()
	require.True(t, u.Client.IsClosing())
	u.Done()
	s.Close()
	_, err = s.Use(ctxT(t, 5*time.Second))
	require.ErrorIs(t, err, errStopped)
}

// A dial that fails is reported to its caller, and the next use tries
// again.
func TestFailedDialReportedAndRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens: dials are refused
	d := &dialCounter{}
	s := plainconn.NewSlot(d.config(addr, client.DefaultOption))
	defer s.Close()
	_, err = s.Use(ctxT(t, 5*time.Second))
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	_, err = s.Use(ctxT(t, 5*time.Second))
	require.ErrorAs(t, err, &op)
	require.Equal(t, int64(2), d.n.Load())
}

// Refuse turns callers away before any client is handed out.
func TestRefuse(t *testing.T) {
	addr, _ := serveArith(t)
	d := &dialCounter{}
	cfg := d.config(addr, client.DefaultOption)
	errGone := errors.New("gone")
	var gone atomic.Bool
	cfg.Refuse = func() error {
		if gone.Load() {
			return errGone
		}
		return nil
	}
	s := plainconn.NewSlot(cfg)
	defer s.Close()
	u, err := s.Use(ctxT(t, 5*time.Second))
	require.NoError(t, err)
	u.Done()
	gone.Store(true)
	_, err = s.Use(ctxT(t, 5*time.Second))
	require.ErrorIs(t, err, errGone)
}
