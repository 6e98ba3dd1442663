package batchclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Record keeps the arguments it was called with.
type Record struct {
	mu   *sync.Mutex
	seen map[int]int // B by A
}

// Take records a.B under a.A.
func (r Record) Take(_ context.Context, a *testsvc.Args, reply *testsvc.Reply) error {
	r.mu.Lock()
	r.seen[a.A] = a.B
	r.mu.Unlock()
	reply.C = a.B
	return nil
}

// serveRecord serves Record on loopback, with the batch plugin when batch
// is set; seen returns a copy of what it recorded.
func serveRecord(t *testing.T, batch bool) (addr string, seen func() map[int]int) {
	t.Helper()
	s := server.NewServer()
	if batch {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	r := Record{mu: new(sync.Mutex), seen: make(map[int]int)}
	require.NoError(t, s.RegisterName("Record", r, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, func() map[int]int {
		r.mu.Lock()
		defer r.mu.Unlock()
		out := make(map[int]int, len(r.seen))
		for k, v := range r.seen {
			out[k] = v
		}
		return out
	}
}

// TestGoEncodesArgsBeforeReturning: Go encodes its arguments before it
// returns, over lanes and over the plain fallback alike, so a change the
// caller makes to them afterwards never reaches the server (and, under
// -race, is no data race). Side by side with plain rpcx: its Go encodes on
// a goroutine of its own, so the reference leaves the arguments alone
// after Go, and the server must see the same on every path.
func TestGoEncodesArgsBeforeReturning(t *testing.T) {
	const calls = 200
	plainAddr, plainSeen := serveRecord(t, false)
	batchAddr, batchSeen := serveRecord(t, true)
	rpcxAddr, rpcxSeen := serveRecord(t, false)
	ctx := ctxT(t, 20*time.Second)

	c := newClient(t)
	require.False(t, waitConnected(t, c, batchAddr).Plain)
	require.True(t, waitConnected(t, c, plainAddr).Plain)
	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", rpcxAddr))
	t.Cleanup(func() { pc.Close() })

	run := func(name string, goCall func(a *testsvc.Args, done chan *client.Call), mutate bool, seen func() map[int]int) {
		done := make(chan *client.Call, calls)
		for i := 0; i < calls; i++ {
			a := &testsvc.Args{A: i, B: i}
			goCall(a, done)
			if mutate {
				a.B = -1 // after Go returned: the caller's again
			}
		}
		for i := 0; i < calls; i++ {
			select {
			case call := <-done:
				require.NoError(t, call.Error, name)
			case <-ctx.Done():
				t.Fatalf("%s: %d of %d calls completed", name, i, calls)
			}
		}
		got := seen()
		late := 0
		for i := 0; i < calls; i++ {
			if got[i] != i {
				late++
			}
		}
		require.Zero(t, late, "%s: %d of %d calls reached the server with arguments changed after Go returned", name, late, calls)
	}
	run("plain rpcx, arguments left alone", func(a *testsvc.Args, done chan *client.Call) {
		pc.Go(ctx, "Record", "Take", a, &testsvc.Reply{}, done)
	}, false, rpcxSeen)
	run("lanes", func(a *testsvc.Args, done chan *client.Call) {
		c.Go(ctx, batchAddr, "Record", "Take", a, &testsvc.Reply{}, done)
	}, true, batchSeen)
	run("plain fallback", func(a *testsvc.Args, done chan *client.Call) {
		c.Go(ctx, plainAddr, "Record", "Take", a, &testsvc.Reply{}, done)
	}, true, plainSeen)
}
