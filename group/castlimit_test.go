package group_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
)

// castUntilCancelled casts to g's nodes under a context that has no
// deadline (so a cast to a hanging node hangs until Close) and is
// cancelled after wait; it returns the cast's error.
func castUntilCancelled(g *group.Group, wait time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(wait, cancel)
	defer stop.Stop()
	return group.CastOne(ctx, g, "Node", "Do", args)
}

// A loop of casts to a node that never answers (a local handler that
// hangs until its context ends; the casts carry no deadline) keeps at
// most DefaultMaxCastsInFlight goroutines of the group: the casts beyond
// it wait for room within their caller's context and fail with
// ErrCastsInFlight when it ends. The old code started a goroutine per
// cast, without limit.
func TestCastsInFlightBounded(t *testing.T) {
	const extra = 50
	l := missingAddr(t)
	hang := &Node{name: l, mode: modeHang}
	g, err := group.New(newBatchClient(t), group.WithNodes(l), group.WithLocal(l, map[string]any{"Node": hang}))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })

	var refused int
	for i := 0; i < group.DefaultMaxCastsInFlight+extra; i++ {
		err := castUntilCancelled(g, 20*time.Millisecond)
		if err != nil {
			require.ErrorIs(t, err, group.ErrCastsInFlight)
			require.ErrorIs(t, err, context.Canceled)
			refused++
		}
	}
	require.Equal(t, extra, refused, "every cast beyond the bound waited and was refused")
	eventually(t, func() bool { return hang.calls.Load() == group.DefaultMaxCastsInFlight }, "the casts in flight started")
	_, inGroup, _ := goroutines()
	require.LessOrEqual(t, inGroup, group.DefaultMaxCastsInFlight, "goroutines of the group")
	require.EqualValues(t, 0, hang.done.Load(), "the casts in flight still hang")
}

// With WithMaxCastsInFlight(n), the n+1st cast waits until its context
// ends (ErrCastsInFlight wrapping the context's error), or until a cast in
// flight ends (it then runs), or until Close (ErrClosed); CastAll and
// CallAny's casts wait likewise.
func TestCastWaitHonoursContext(t *testing.T) {
	ok, nok := startNode(t, modeOK, true)
	l := missingAddr(t)
	hang := &Node{name: l, mode: modeHang}
	g, err := group.New(newBatchClient(t), group.WithNodes(l), group.WithMaxCastsInFlight(2),
		group.WithLocal(l, map[string]any{"Node": hang}))
	require.NoError(t, err)

	// Two casts that end with their context's deadline fill the bound.
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, group.CastOne(short, g, "Node", "Do", args))
	require.NoError(t, group.CastOne(short, g, "Node", "Do", args))
	eventually(t, func() bool { return hang.calls.Load() == 2 }, "two casts in flight")

	ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	start := time.Now()
	err = group.CastOne(ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrCastsInFlight)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second, "the wait ended with its context")
	require.ErrorIs(t, group.CastAll(ctx, g, "Node", "Do", args, group.On(ok)), group.ErrCastsInFlight)
	require.EqualValues(t, 2, hang.calls.Load(), "a refused cast never ran")

	// A cast that waits long enough runs once a cast in flight ends (at
	// the two casts' 2 s deadline).
	long := ctxT(t, 10*time.Second)
	require.NoError(t, group.CastAll(long, g, "Node", "Do", markedArgs, group.On(ok)))
	eventually(t, func() bool { return nok.marked.Load() == 1 }, "the waiting cast ran")

	require.NoError(t, g.Close())

	// CallAny's casts to the rest after a local success wait too: a
	// hanging cast ("Hang" on the local node) fills the bound of one;
	// CallAny returns the local result when its context ends, the cast
	// dropped, or once the hanging cast has ended (at its deadline), the
	// cast sent.
	a, na := startNode(t, modeOK, true)
	g2, err := group.New(newBatchClient(t), group.WithNodes(l, a), group.WithMaxCastsInFlight(1),
		group.WithLocal(l, map[string]any{"Node": &Node{name: l, mode: modeOK}, "Hang": &Node{name: l, mode: modeHang}}))
	require.NoError(t, err)
	t.Cleanup(func() { g2.Close() })
	hangFor, cancel3 := context.WithTimeout(context.Background(), time.Second)
	defer cancel3()
	require.NoError(t, group.CastOne(hangFor, g2, "Hang", "Do", args, group.On(l)))
	r, err := group.CallAny[Answer](ctx100ms(t), g2, "Node", "Do", markedArgs)
	require.NoError(t, err)
	require.Equal(t, l, r.Node)
	r, err = group.CallAny[Answer](long, g2, "Node", "Do", markedArgs)
	require.NoError(t, err)
	require.Equal(t, l, r.Node)
	eventually(t, func() bool { return na.marked.Load() == 1 }, "the second CallAny's cast ran")
	require.EqualValues(t, 1, na.calls.Load(), "the first CallAny's cast was dropped")

	// Close ends a wait: fill g3's bound with a hanging cast, wait on it
	// in a goroutine, and Close.
	g3, err := group.New(newBatchClient(t), group.WithNodes(l), group.WithMaxCastsInFlight(1),
		group.WithLocal(l, map[string]any{"Node": hang}))
	require.NoError(t, err)
	require.NoError(t, group.CastOne(long, g3, "Node", "Do", args))
	waited := make(chan error, 1)
	go func() { waited <- group.CastOne(long, g3, "Node", "Do", args) }()
	eventually(t, func() bool {
		_, _, dump := goroutines()
		return strings.Contains(dump, "group.(*spec).acquireCast")
	}, "the second cast waits")
	require.NoError(t, g3.Close())
	select {
	case err := <-waited:
		require.ErrorIs(t, err, group.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting cast")
	}
	require.True(t, errors.Is(group.CastOne(long, g3, "Node", "Do", args), group.ErrClosed))
}

// ctx100ms returns a context that ends 100 ms from now.
func ctx100ms(t *testing.T) context.Context { return ctxT(t, 100*time.Millisecond) }
