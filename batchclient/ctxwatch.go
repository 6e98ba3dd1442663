package batchclient

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// One watch for a context that many calls share.
//
// A select on a call's channel and its context's Done puts the caller on
// Done's wait queue too: when thousands of callers share one context (a
// request fanned out, a batch job), each takes that channel's lock twice
// per call, from every core. So a context seen shared (two of its calls,
// sampled one in watchSample, in a row) gets one context.AfterFunc for all
// its calls, a ctxWatch: such a call carries the watch in its Pending
// (Group) and waits on its own Done channel alone; when the context ends,
// the watch completes the calls that carry it, on every lane, with the
// context's error, as the select would have. The watches live in
// watchSlots slots of the client until their context ends (or Close); the
// call path only reads them, and with every slot taken, other contexts'
// calls select as before.
const (
	watchSlots  = 4
	watchSample = 16
)

// ctxWatch is the watch of one shared context.
type ctxWatch struct {
	c    *Client
	ctx  context.Context
	done <-chan struct{} // ctx.Done(), what calls are matched by
	slot int
	// fired is set when the context has ended, before the lanes are
	// walked: a call that registered after its lane was walked sees it
	// (see Call), and claims itself.
	fired atomic.Bool
	// lanes are the lanes the watch's calls went to (copy on write under
	// mu); a call adds its lane before its entry is registered there.
	mu    sync.Mutex
	lanes atomic.Pointer[[]*lane.Lane]
	stop  func() bool
}

// sharedWatch returns the watch of the context whose Done channel is done,
// or nil when it has none (then the caller selects).
func (c *Client) sharedWatch(ctx context.Context, done <-chan struct{}) *ctxWatch {
	for i := range c.watches {
		if w := c.watches[i].Load(); w != nil && w.done == done {
			return w
		}
	}
	c.noteContext(ctx, done)
	return nil
}

// noteContext samples a context that has no watch, and gives it one when
// it is seen twice in a row. Out of line: the call path's frames stay
// small (see Call).
//
//go:noinline
func (c *Client) noteContext(ctx context.Context, done <-chan struct{}) {
	if rand.Uint32()%watchSample != 0 || c.closed.Load() {
		return
	}
	if last, _ := c.seenDone.Swap(done).(<-chan struct{}); last != done {
		return
	}
	c.watch(ctx, done)
}

// watch gives the context a watch in a free slot, if there is one, and
// reports whether it did; a closed client keeps none.
func (c *Client) watch(ctx context.Context, done <-chan struct{}) bool {
	w := &ctxWatch{c: c, ctx: ctx, done: done}
	for i := range c.watches {
		if c.watches[i].CompareAndSwap(nil, w) {
			w.slot = i
			w.mu.Lock()
			w.stop = context.AfterFunc(ctx, w.fire)
			w.mu.Unlock()
			if c.closed.Load() {
				// Close ran since the caller looked (noteContext): its
				// stopWatches may have dropped the slot before stop was
				// set, or run before the slot was taken. Either way the
				// watch is undone here; had closed read false, Close's
				// stopWatches would come later and find stop set. A call
				// that took the watch meanwhile routed before Close set
				// closed: Close fails its lane at once (ErrClosed).
				c.watches[i].CompareAndSwap(w, nil)
				w.stop()
				return false
			}
			return true
		}
	}
	return false
}

// watchCount is the number of watches the client holds.
func (c *Client) watchCount() int {
	n := 0
	for i := range c.watches {
		if c.watches[i].Load() != nil {
			n++
		}
	}
	return n
}

// addLane records l as a lane the watch's calls go to; the caller does so
// before its entry is registered on l.
func (w *ctxWatch) addLane(l *lane.Lane) {
	if ls := w.lanes.Load(); ls != nil {
		for _, x := range *ls {
			if x == l {
				return
			}
		}
	}
	w.addLaneSlow(l)
}

//go:noinline
func (w *ctxWatch) addLaneSlow(l *lane.Lane) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := w.liveLanesLocked()
	for _, x := range ls {
		if x == l {
			return
		}
	}
	ls = append(ls, l)
	w.lanes.Store(&ls)
}

// liveLanesLocked is a copy of the watch's lanes without the failed ones:
// a failed lane has completed its calls (Lane.fail), so it need not be
// walked, and is not kept (nor its buffers). w.mu is held.
func (w *ctxWatch) liveLanesLocked() []*lane.Lane {
	var ls []*lane.Lane
	if old := w.lanes.Load(); old != nil {
		for _, x := range *old {
			select {
			case <-x.Dead():
			default:
				ls = append(ls, x)
			}
		}
	}
	return ls
}

// dropDeadLanes takes the failed lanes out of every watch. A pool that
// was lost calls it (Client.poolLost): a context that never ends keeps its
// watch, and without this the lanes of the lost pool until one of its
// calls goes to a lane the watch does not know yet, which may be never.
func (c *Client) dropDeadLanes() {
	for i := range c.watches {
		w := c.watches[i].Load()
		if w == nil {
			continue
		}
		w.mu.Lock()
		if old := w.lanes.Load(); old != nil {
			if ls := w.liveLanesLocked(); len(ls) < len(*old) {
				w.lanes.Store(&ls)
			}
		}
		w.mu.Unlock()
	}
}

// fire runs when the context ends: no call takes the watch any more, and
// the calls that carry it and still wait are completed with the context's
// error.
func (w *ctxWatch) fire() {
	w.fired.Store(true)
	w.c.watches[w.slot].CompareAndSwap(w, nil)
	err := w.ctx.Err()
	ls := w.lanes.Load()
	if ls == nil {
		return
	}
	var pcs []*lane.Pending
	for _, l := range *ls {
		pcs = l.ClaimGroup(w, pcs[:0])
		for _, pc := range pcs {
			w.c.metrics.errTimeout.Inc(1)
			l.Finish(pc, err)
		}
	}
}

// stopWatches drops the client's watches (Close, once its lanes have
// failed their calls).
func (c *Client) stopWatches() {
	for i := range c.watches {
		if w := c.watches[i].Swap(nil); w != nil {
			w.mu.Lock()
			stop := w.stop
			w.mu.Unlock()
			if stop != nil {
				stop()
			}
		}
	}
}
