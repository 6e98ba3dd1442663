package batchserver_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Slowpoke holds every call for a while, and counts the calls that
// started and finished.
type Slowpoke struct {
	hold              time.Duration
	started, finished atomic.Int64
}

// Hold waits s.hold (or until ctx ends) and replies A*2.
func (s *Slowpoke) Hold(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	s.started.Add(1)
	defer s.finished.Add(1)
	select {
	case <-time.After(s.hold):
	case <-ctx.Done():
		return ctx.Err()
	}
	r.C = a.A * 2
	return nil
}

// shutdownWithCallsInFlight starts n calls to a slow handler through call,
// shuts the server down once every handler runs, and returns the calls'
// errors, how many handlers had finished when Shutdown returned, and
// Shutdown's own error.
func shutdownWithCallsInFlight(t *testing.T, s *server.Server, sp *Slowpoke, n int, call func(ctx context.Context, i int) error) (errs []error, finishedAtReturn int64, shutdownErr error) {
	t.Helper()
	errs = make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = call(ctxT(t, 20*time.Second), i)
		}()
	}
	require.True(t, eventually(10*time.Second, func() bool { return sp.started.Load() == int64(n) }),
		"only %d of %d handlers started", sp.started.Load(), n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	shutdownErr = s.Shutdown(ctx)
	finishedAtReturn = sp.finished.Load()
	t.Logf("Shutdown took %v", time.Since(start).Round(time.Millisecond))
	wg.Wait()
	return errs, finishedAtReturn, shutdownErr
}

// Server.Shutdown with calls in flight waits for their handlers, and every
// call gets its reply: on the batch path as on plain rpcx, and also when
// the services were unregistered ahead of Shutdown (as registry users do,
// so that clients see the server leave first; Shutdown then runs no
// Unregister hook). On the old code Shutdown returned at once and the
// batched calls failed with "connection to the batch peer lost" although
// their handlers ran.
func TestShutdownWaitsForCallsInFlight(t *testing.T) {
	const n = 64
	for _, tc := range []struct {
		name                         string
		batch, unregister, delistOne bool
	}{
		{"plain", false, false, false},
		{"batch", true, false, false},
		{"plain/UnregisterAll_first", false, true, false},
		{"batch/UnregisterAll_first", true, true, false},
		// One service delisted alone (the plugins' DoUnregister): Shutdown
		// still runs the hooks, which start the drain.
		{"plain/DoUnregister_first", false, false, true},
		{"batch/DoUnregister_first", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &Slowpoke{hold: 500 * time.Millisecond}
			s := server.NewServer()
			require.NoError(t, s.RegisterName("Slowpoke", sp, ""))
			if tc.batch {
				_, err := batchserver.New(s)
				require.NoError(t, err)
			}
			addr := serve(t, s)
			if tc.unregister {
				require.NoError(t, s.UnregisterAll())
			}
			if tc.delistOne {
				require.NoError(t, s.Plugins.DoUnregister("Slowpoke"))
			}
			var call func(ctx context.Context, i int) error
			if !tc.batch {
				pc := plainClient(t, addr)
				call = func(ctx context.Context, i int) error {
					var r testsvc.Reply
					c := pc.Go(ctx, "Slowpoke", "Hold", &testsvc.Args{A: i}, &r, make(chan *client.Call, 1))
					<-c.Done
					if c.Error == nil && r.C != 2*i {
						return errors.New("wrong reply")
					}
					return c.Error
				}
			} else {
				c := newClient(t)
				require.Equal(t, batchclient.Connected, waitConnected(t, c, addr).Status)
				call = func(ctx context.Context, i int) error {
					var r testsvc.Reply
					err := c.Call(ctx, addr, "Slowpoke", "Hold", &testsvc.Args{A: i}, &r)
					if err == nil && r.C != 2*i {
						return errors.New("wrong reply")
					}
					return err
				}
			}
			errs, finished, err := shutdownWithCallsInFlight(t, s, sp, n, call)
			require.NoError(t, err, "Shutdown")
			assert.EqualValues(t, n, finished, "handlers finished when Shutdown returned")
			failed := 0
			for i, err := range errs {
				if err != nil {
					if failed++; failed <= 3 {
						t.Errorf("call %d: %v", i, err)
					}
				}
			}
			assert.Zero(t, failed, "calls failed")
		})
	}
}

// A call made after Shutdown has begun is not sent to the draining server:
// it fails at once with an error rpcx's Failover retries (ErrDraining, not
// a ServiceError), while the calls in flight still get their replies.
func TestShutdownRefusesLateCallsRetryably(t *testing.T) {
	sp := &Slowpoke{hold: 1500 * time.Millisecond}
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Slowpoke", sp, ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	addr := serve(t, s)
	c := newClient(t)
	require.Equal(t, batchclient.Connected, waitConnected(t, c, addr).Status)

	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var r testsvc.Reply
			errs <- c.Call(ctxT(t, 20*time.Second), addr, "Slowpoke", "Hold", &testsvc.Args{A: i}, &r)
		}()
	}
	require.True(t, eventually(10*time.Second, func() bool { return sp.started.Load() == n }))
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdownDone <- s.Shutdown(ctx)
	}()
	require.True(t, eventually(10*time.Second, p.Draining), "the plugin never began to drain")
	require.True(t, eventually(10*time.Second, func() bool { return c.Info(addr).Status != batchclient.Connected }),
		"the client never heard the drain notice")

	var r testsvc.Reply
	err = c.Call(ctxT(t, 20*time.Second), addr, "Slowpoke", "Hold", &testsvc.Args{A: 1}, &r)
	require.ErrorIs(t, err, batchclient.ErrDraining)
	var se client.ServiceError
	assert.False(t, errors.As(err, &se), "a ServiceError is not retried by Failover: %v", err)

	for range n {
		assert.NoError(t, <-errs)
	}
	assert.NoError(t, <-shutdownDone)
	assert.EqualValues(t, n, sp.started.Load(), "the late call ran")
}
