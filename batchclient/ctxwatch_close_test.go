package batchclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// TestSharedContextWatchMadeAsCloseRuns: a watch made while Close runs
// does not outlive Close. The sampler (noteContext) looks at closed, then
// takes a slot; when Close sets closed and drops the watches between the
// two, the watch is made after Close has returned (here: WatchContext
// after Close). It must not stay in its slot nor keep its context.AfterFunc
// registered, which for a context that never ends kept the closed
// client reachable from the context for good.
func TestSharedContextWatchMadeAsCloseRuns(t *testing.T) {
	c := newClient(t)
	// The counter sees the watch's AfterFunc, and Close stop it.
	before := newAfterFuncCounter()
	require.True(t, batchclient.WatchContext(c, before))
	require.Equal(t, 1, before.registered())
	require.NoError(t, c.Close())
	require.Zero(t, before.registered(), "Close left the watch's context.AfterFunc registered")

	ctx := newAfterFuncCounter()
	batchclient.WatchContext(c, ctx)
	require.Zero(t, batchclient.SharedWatches(c), "a watch made as Close ran stayed in its slot")
	require.Zero(t, ctx.registered(), "a watch made as Close ran left its context.AfterFunc registered")
}

// afterFuncCounter is a context that never ends by itself and counts the
// functions context.AfterFunc has registered on it and not stopped:
// context.AfterFunc calls a context's own AfterFunc method when it has
// one (and is not a context package's cancelCtx).
type afterFuncCounter struct {
	done chan struct{}
	mu   sync.Mutex
	fns  map[int]func()
	next int
}

func newAfterFuncCounter() *afterFuncCounter {
	return &afterFuncCounter{done: make(chan struct{}), fns: map[int]func(){}}
}

func (c *afterFuncCounter) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *afterFuncCounter) Done() <-chan struct{}       { return c.done }
func (c *afterFuncCounter) Value(any) any               { return nil }

func (c *afterFuncCounter) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// AfterFunc registers f, as context.AfterFunc expects of a context.
func (c *afterFuncCounter) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.fns[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.fns[id]
		delete(c.fns, id)
		return ok
	}
}

func (c *afterFuncCounter) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fns)
}

var _ context.Context = (*afterFuncCounter)(nil)
