//go:build linux

package plainconn_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/synstall"
)

// Each caller waits for a dial no longer than its own deadline, not for
// rpcx's ConnectTimeout, and they share one dial.
func TestDialHonoursCallerDeadline(t *testing.T) {
	addr := synstall.Addr(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 5 * time.Second
	d := &dialCounter{}
	s := plainconn.NewSlot(d.config(addr, opt))
	defer s.Close()

	const users = 4
	took := make([]time.Duration, users)
	errs := make([]error, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, errs[i] = s.Use(ctx)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i := range users {
		require.ErrorIs(t, errs[i], context.DeadlineExceeded, "user %d", i)
		// 100 ms deadline against a 5 s ConnectTimeout; the margin is for
		// a busy 2-core machine.
		require.Less(t, took[i], 1500*time.Millisecond, "user %d returned after %v (all: %v)", i, took[i], took)
	}
	require.Equal(t, int64(1), d.n.Load(), "one dial, joined by every caller")
}

// Close interrupts a dial under way at once, and the caller waiting for it
// hears that the slot stopped.
func TestCloseInterruptsDial(t *testing.T) {
	addr := synstall.Addr(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 8 * time.Second
	d := &dialCounter{started: make(chan struct{}, 1)}
	s := plainconn.NewSlot(d.config(addr, opt))

	returned := make(chan error, 1)
	go func() {
		_, err := s.Use(ctxT(t, 30*time.Second))
		returned <- err
	}()
	<-d.started
	start := time.Now()
	s.Close()
	require.Less(t, time.Since(start), 2*time.Second, "Close waited for the dial")
	select {
	case err := <-returned:
		require.ErrorIs(t, err, errStopped)
	case <-time.After(5 * time.Second):
		t.Fatal("the caller waiting for the dial did not return after Close")
	}
}
