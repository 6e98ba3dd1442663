package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestSharedContextGetsWatch: calls that share a context give it a watch
// (the sampler sees it twice in a row within a few dozen calls), and the
// watch is dropped once the context ends.
func TestSharedContextGetsWatch(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 5000 && batchclient.SharedWatches(c) == 0; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r))
		require.Equal(t, 2*i, r.C)
	}
	require.Equal(t, 1, batchclient.SharedWatches(c), "5,000 calls on one context gave it no watch")
	cancel()
	require.Eventually(t, func() bool { return batchclient.SharedWatches(c) == 0 },
		5*time.Second, time.Millisecond, "the ended context's watch stayed")
	// A context without a Done channel is never watched.
	for i := 0; i < 500; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(context.Background(), addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &r))
	}
	require.Zero(t, batchclient.SharedWatches(c))
}

// TestSharedContextWatchEndsCalls: calls waiting under a watched context
// (on call.Done alone, no select) all return the context's error at once
// when it is cancelled, or when its deadline passes; their late replies
// reach nobody, and the next calls get their own replies.
func TestSharedContextWatchEndsCalls(t *testing.T) {
	const (
		callers = 200
		lateMs  = 1000 // far above the ~150 ms the calls should take, on a loaded machine too
	)
	for _, how := range []string{"cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			addr, _ := startServer(t, false)
			c := newClient(t)
			waitConnected(t, c, addr)
			var (
				ctx    context.Context
				cancel context.CancelFunc
				want   error
			)
			if how == "cancel" {
				ctx, cancel = context.WithCancel(context.Background())
				want = context.Canceled
			} else {
				ctx, cancel = context.WithTimeout(context.Background(), 150*time.Millisecond)
				want = context.DeadlineExceeded
			}
			defer cancel()
			require.True(t, batchclient.WatchContext(c, ctx))
			started := make(chan struct{}, callers)
			type result struct {
				err   error
				reply *testsvc.Reply
			}
			results := make(chan result, callers)
			for i := 0; i < callers; i++ {
				go func() {
					r := &testsvc.Reply{C: -1}
					started <- struct{}{}
					err := c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: lateMs, B: i}, r)
					results <- result{err, r}
				}()
			}
			for i := 0; i < callers; i++ {
				<-started
			}
			if how == "cancel" {
				time.Sleep(50 * time.Millisecond)
				cancel()
			}
			began := time.Now()
			var ended []*testsvc.Reply
			for i := 0; i < callers; i++ {
				var r result
				select {
				case r = <-results:
				case <-time.After(10 * time.Second):
					t.Fatalf("%d of %d calls still wait after their context ended", callers-i, callers)
				}
				require.ErrorIs(t, r.err, want)
				ended = append(ended, r.reply)
			}
			require.Less(t, time.Since(began), lateMs*time.Millisecond, "the watched calls did not end with their context")
			require.Eventually(t, func() bool { return batchclient.SharedWatches(c) == 0 },
				5*time.Second, time.Millisecond, "the ended context's watch stayed")

			next := ctxT(t, 30*time.Second)
			concurrently(t, callers, func(i int) error {
				var r testsvc.Reply
				if err := c.Call(next, addr, "Arith", "Sleep", &testsvc.Args{A: 2 * lateMs, B: 1000 + i}, &r); err != nil {
					return err
				}
				if r.C != 1000+i {
					return fmt.Errorf("call %d got reply %d", i, r.C)
				}
				return nil
			})
			for i, r := range ended {
				if r.C != -1 {
					t.Errorf("cancelled call %d: its reply was written after it returned (%d)", i, r.C)
				}
			}
		})
	}
}

// TestSharedContextWatchRace: callers keep calling under a watched
// context while it is cancelled; every call ends, with its reply or with
// the context's error, whether it registered before the watch walked its
// lane, while it did, or after (it then claims itself back). Calls made
// after the cancel fail at once. Under the race detector this also checks
// the watch's lanes and fired flag.
func TestSharedContextWatchRace(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	for round := 0; round < 20; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		require.True(t, batchclient.WatchContext(c, ctx))
		var (
			wg            sync.WaitGroup
			ok, cancelled atomic.Int64
			bad           atomic.Pointer[error]
		)
		for g := 0; g < 50; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					var r testsvc.Reply
					err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: g}, &r)
					switch {
					case err == nil && r.C == i*g:
						ok.Add(1)
					case errors.Is(err, context.Canceled):
						cancelled.Add(1)
					default:
						err = fmt.Errorf("call %d×%d: reply %d, error %v", i, g, r.C, err)
						bad.Store(&err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: calls under the cancelled context did not all return", round)
		}
		if p := bad.Load(); p != nil {
			t.Fatalf("round %d: %v", round, *p)
		}
		require.Positive(t, cancelled.Load(), "round %d: no call saw the cancel", round)
		require.Eventually(t, func() bool { return batchclient.SharedWatches(c) == 0 },
			5*time.Second, time.Millisecond)
	}
	require.Zero(t, batchclient.WokenCallers(c))
}

// TestSharedContextWatchFiredBeforeRegistration: a call that takes a
// watch which has already fired and walked the lanes (its context ended
// between the call's look at the watches and its registration) claims
// itself back and returns the context's error at once, instead of
// waiting for a reply the watch will never cut short.
func TestSharedContextWatchFiredBeforeRegistration(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	batchclient.FiredWatch(c, ctx)
	began := time.Now()
	var r testsvc.Reply
	err := c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 2000, B: 1}, &r)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(began), time.Second, "the call waited for its reply")
	require.Zero(t, r.C)
}
