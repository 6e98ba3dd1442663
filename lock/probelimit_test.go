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

// Issue 32, item 4: the limit is on a branch of the walk, not on the
// holders the whole walk looked at. A writer that holds something asks
// for a key held by more readers than ProbeLimit: each reader is one
// branch of one step (it waits for nothing), so the writer waits, and
// gets the key when the readers leave.
func TestNoProbeLimitForAWriterBehindManyReaders(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	readers := make([]*Holder, DefaultProbeLimit+1)
	for i := range readers {
		readers[i] = newHolder(t, n)
		if err := readers[i].Lock(ctx, Shared, "k"); err != nil {
			t.Fatal(err)
		}
	}
	w := newHolder(t, n)
	if err := w.Lock(ctx, Exclusive, "x"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	werr := lockAsync(wctx, w, Exclusive, "k")
	time.Sleep(300 * time.Millisecond)
	mustNotReturn(t, werr, "the writer behind the readers")
	for _, r := range readers {
		r.Release("k")
	}
	if err := recv(t, werr, "the writer"); err != nil {
		t.Fatalf("a writer behind %d readers (no cycle, every branch one step long): %v", len(readers), err)
	}
}

// The limit still ends a branch that is longer than it: a chain of
// holders, each holding its key and waiting for the next one's.
func TestProbeLimitEndsALongBranch(t *testing.T) {
	// No second walk: each wait of the chain walks once, when it queues.
	n, err := New(Config{ProbeLimit: 5, ProbeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const chain = 8
	hs := make([]*Holder, chain+1)
	for i := range hs {
		hs[i] = newHolder(t, n)
		if err := hs[i].Lock(ctx, Exclusive, fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	// From the head of the chain on: hs[i] waits for hs[i+1]'s key, and
	// its walk, when it queues, is one step long.
	var errs []chan error
	for i := 1; i < chain; i++ {
		errs = append(errs, lockAsync(ctx, hs[i], Exclusive, fmt.Sprint("c", i+1)))
		if !waitFor(queuedAtLeast(n, fmt.Sprint("c", i+1), 1)) {
			t.Fatal("chain member did not queue")
		}
	}
	err = hs[0].Lock(ctx, Exclusive, "c1")
	if !errors.Is(err, ErrProbeLimit) {
		t.Fatalf("the request at the head of a branch of %d waits, ProbeLimit 5: %v, want ErrProbeLimit", chain, err)
	}
	for _, h := range hs {
		h.Close()
	}
	for _, ch := range errs {
		<-ch
	}
}
