package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// elock's design 4 with its occasional writer: a writer holds k; readers,
// each holding a key of its own, ask k Shared and queue behind it. There
// is no cycle: when the writer leaves, every reader gets k. The walk
// treats each reader as waiting for the reader just ahead, so a reader at
// queue position p walks ~p locks, and past ProbeLimit/2 readers fail with
// ErrProbeLimit although nothing is wrong.
func TestNoProbeLimitForReadersQueuedBehindAWriter(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	w := newHolder(t, n)
	if err := w.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	const readers = 700
	var failed, deadlock, plimit atomic.Int64
	var minPos atomic.Int64
	minPos.Store(1 << 30)
	var first atomic.Value
	var wg sync.WaitGroup
	hs := make([]*Holder, readers)
	for i := range hs {
		hs[i] = newHolder(t, n)
		if err := hs[i].Lock(ctx, Shared, fmt.Sprint("own", i)); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	start := time.Now()
	defer func() { t.Logf("took %v", time.Since(start)) }()
	defer cancel()
	for i := range hs {
		// One at a time into the queue, so positions are in order.
		wg.Add(1)
		go func(h *Holder, pos int) {
			defer wg.Done()
			if err := h.Lock(rctx, Shared, "k"); err != nil {
				failed.Add(1)
				if errors.Is(err, ErrDeadlock) {
					deadlock.Add(1)
				}
				if errors.Is(err, ErrProbeLimit) {
					plimit.Add(1)
					for {
						m := minPos.Load()
						if int64(pos) >= m || minPos.CompareAndSwap(m, int64(pos)) {
							break
						}
					}
				}
				first.CompareAndSwap(nil, err.Error())
			}
		}(hs[i], i)
		if !waitFor(func() bool { return ticketOf(n, "k") >= uint64(i+2) }) {
			t.Fatal("reader did not queue")
		}
	}
	time.Sleep(500 * time.Millisecond)
	w.Release("k")
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d readers queued behind one writer failed: %d ErrProbeLimit (first at queue position %d), %d ErrDeadlock; first error: %v", failed.Load(), readers, plimit.Load(), minPos.Load(), deadlock.Load(), first.Load())
	}
}
