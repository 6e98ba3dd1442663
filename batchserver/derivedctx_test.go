package batchserver_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// derivedPerCall is how many contexts Derive derives from its own.
const derivedPerCall = 200

// Derive derives derivedPerCall cancellable contexts from its handler's
// context, as a handler does for its own calls downstream, and answers
// C = how many goroutines that started.
type Derive struct{}

// Many derives the contexts, counts the goroutines, then cancels them.
func (Derive) Many(ctx context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	before := runtime.NumGoroutine()
	cancels := make([]context.CancelFunc, 0, derivedPerCall)
	for range derivedPerCall {
		_, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
	}
	r.C = runtime.NumGoroutine() - before
	for _, cancel := range cancels {
		cancel()
	}
	return nil
}

// keptCtx is a context Keep derived, and its cancel.
type keptCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// derived receives the context Keep derived, for the test to watch; the
// test cancels it when done.
var derived = make(chan keptCtx, 1)

// Keep derives a context from its handler's, hands it to the test and,
// when asked (A = 1), waits for it to end before returning.
func (Derive) Keep(ctx context.Context, a *testsvc.Args, _ *testsvc.Reply) error {
	d, cancel := context.WithCancel(ctx)
	derived <- keptCtx{d, cancel}
	if a.A == 1 {
		<-d.Done()
	}
	return nil
}

// TestDerivedContextsEndWithTheEntry: a context derived from a handler's
// ends with DeadlineExceeded at the caller's deadline, and with Canceled
// when the handler returns, on both paths.
func TestDerivedContextsEndWithTheEntry(t *testing.T) {
	s, _ := newServer(t)
	require.NoError(t, s.RegisterName("Derive", Derive{}, ""))
	addr := serve(t, s)
	pc := plainClient(t, addr)
	c := newClient(t)
	waitConnected(t, c, addr)
	const deadline = 300 * time.Millisecond
	call := map[string]func(wait bool) error{
		"plain rpcx": func(wait bool) error {
			md := map[string]string{share.ServerTimeout: strconv.Itoa(int(deadline / time.Millisecond))}
			ctx := context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, md)
			return pc.Call(ctx, "Derive", "Keep", &testsvc.Args{A: boolInt(wait)}, &testsvc.Reply{})
		},
		"batch": func(wait bool) error {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			return c.Call(ctx, addr, "Derive", "Keep", &testsvc.Args{A: boolInt(wait)}, &testsvc.Reply{})
		},
	}
	for _, path := range []string{"plain rpcx", "batch"} {
		t.Run(path, func(t *testing.T) {
			// At the deadline.
			errc := make(chan error, 1)
			go func() { errc <- call[path](true) }()
			k := <-derived
			defer k.cancel()
			select {
			case <-k.ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the derived context did not end at the caller's deadline")
			}
			require.ErrorIs(t, k.ctx.Err(), context.DeadlineExceeded)
			<-errc
			// When the handler returns.
			require.NoError(t, call[path](false))
			k = <-derived
			defer k.cancel()
			select {
			case <-k.ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the derived context did not end when the handler returned")
			}
			require.ErrorIs(t, k.ctx.Err(), context.Canceled)
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDerivedContextsStartNoGoroutine: a context derived from a handler's
// context whose caller set a deadline is a child of it, as on the plain
// path, not a goroutine watching it. rpcx gives such a handler a
// context.WithTimeout context (its XClient sends the caller's deadline as
// share.ServerTimeout), so context.WithCancel, WithTimeout and AfterFunc
// on it only register a child; on the batch path each started a goroutine
// that lived as long as the derived context.
func TestDerivedContextsStartNoGoroutine(t *testing.T) {
	s, _ := newServer(t)
	require.NoError(t, s.RegisterName("Derive", Derive{}, ""))
	addr := serve(t, s)

	// Plain rpcx, as its XClient calls with a deadline.
	pc := plainClient(t, addr)
	var plain testsvc.Reply
	pctx := context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, map[string]string{share.ServerTimeout: "5000"})
	require.NoError(t, pc.Call(pctx, "Derive", "Many", &testsvc.Args{}, &plain))

	// The batch path, with the caller's deadline.
	c := newClient(t)
	waitConnected(t, c, addr)
	var batch testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Derive", "Many", &testsvc.Args{}, &batch))

	t.Logf("goroutines started by %d derived contexts: plain rpcx %d, batch %d", derivedPerCall, plain.C, batch.C)
	require.Less(t, plain.C, derivedPerCall/2, "plain rpcx: derived contexts started goroutines (the test's premise is wrong)")
	require.Less(t, batch.C, derivedPerCall/2, "batch path: each context derived from the handler's started a goroutine")
}
