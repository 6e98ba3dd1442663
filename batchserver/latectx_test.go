package batchserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestEntryContextErrStaysAfterLateDone: once a handler's context has
// reported its error, the error never changes, whatever is asked of the
// context later (context.Context's contract): an entry that ended before
// its deadline reads Canceled, and still does after the deadline has
// passed and something then calls Done or derives a context from it.
func TestEntryContextErrStaysAfterLateDone(t *testing.T) {
	addr, s, _ := startServer(t)
	probe := &CtxProbe{kept: make(chan context.Context, 2)}
	require.NoError(t, s.RegisterName("CtxProbe", probe, ""))
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 20*time.Second)

	for _, late := range []string{"Done", "WithCancel"} {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		var r testsvc.Reply
		require.NoError(t, c.Call(cctx, addr, "CtxProbe", "Keep", &testsvc.Args{}, &r))
		cancel()
		kept := <-probe.kept
		dl, ok := kept.Deadline()
		require.True(t, ok)
		// The handler returned: its entry ended before the deadline.
		require.True(t, eventually(5*time.Second, func() bool { return kept.Err() != nil }))
		first := kept.Err()
		require.ErrorIs(t, first, context.Canceled)
		time.Sleep(time.Until(dl) + 20*time.Millisecond) // let the deadline pass
		switch late {
		case "Done":
			<-kept.Done()
		case "WithCancel":
			d, stop := context.WithCancel(kept)
			<-d.Done()
			assert.Equal(t, first, d.Err(), "the derived context's error")
			stop()
		}
		assert.Equal(t, first, kept.Err(), "Err changed after it was set (%s after the deadline)", late)
	}
}
