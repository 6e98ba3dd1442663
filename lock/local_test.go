package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// guard checks the lock invariant on one key: never two exclusive holders,
// never a writer beside readers.
type guard struct {
	readers, writers atomic.Int64
	bad              atomic.Int64
}

func (g *guard) enter(m Mode) {
	if m == Exclusive {
		if g.writers.Add(1) != 1 || g.readers.Load() != 0 {
			g.bad.Add(1)
		}
	} else {
		g.readers.Add(1)
		if g.writers.Load() != 0 {
			g.bad.Add(1)
		}
	}
}

func (g *guard) leave(m Mode) {
	if m == Exclusive {
		g.writers.Add(-1)
	} else {
		g.readers.Add(-1)
	}
}

func TestLocalInvariantUnderContention(t *testing.T) {
	n := localNode(t)
	const keys, workers, iters = 4, 64, 400
	g := newGrantBook(t, n)
	var wg sync.WaitGroup
	var done atomic.Int64
	stop := time.Now().Add(20 * time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h := newHolder(t, n)
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < iters && time.Now().Before(stop); i++ {
				k := r.IntN(keys)
				m := Shared
				if r.IntN(3) == 0 {
					m = Exclusive
				}
				if err := h.Lock(context.Background(), m, fmt.Sprint("k", k)); err != nil {
					t.Errorf("lock: %v", err)
					return
				}
				g.granted(h, []string{""}, m, fmt.Sprint("k", k))
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
				}
				g.releasing(h)
				h.Release(fmt.Sprint("k", k))
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	g.check()
	for k := range keys {
		if m, h, q := n.table.snapshot(fmt.Sprint("k", k)); h != 0 || q != 0 {
			t.Errorf("key k%d left behind: mode %v, %d holders, %d queued", k, m, h, q)
		}
	}
	if done.Load() < workers {
		t.Fatalf("only %d lock rounds ran", done.Load())
	}
}

// Multi-key requests in random order under contention, with deadlocks
// detected and retried: the invariant still holds, every round finishes.
func TestLocalMultiKeyRandomOrder(t *testing.T) {
	n := localNode(t)
	const keys, workers, iters = 6, 16, 100
	g := newGrantBook(t, n)
	var wg sync.WaitGroup
	var deadlocks atomic.Int64
	stop := time.Now().Add(30 * time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h := newHolder(t, n)
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := 0; i < iters && time.Now().Before(stop); {
				perm := r.Perm(keys)[:3]
				ks := make([]string, len(perm))
				for j, k := range perm {
					ks[j] = fmt.Sprint("k", k)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := h.Lock(ctx, Exclusive, ks...)
				cancel()
				if errors.Is(err, ErrDeadlock) {
					deadlocks.Add(1)
					h.ReleaseAll()
					continue
				}
				if err != nil {
					t.Errorf("lock %v: %v", ks, err)
					return
				}
				g.granted(h, []string{""}, Exclusive, ks...)
				g.releasing(h)
				h.ReleaseAll()
				i++
			}
		}(w)
	}
	wg.Wait()
	g.check()
	t.Logf("deadlocks detected and retried: %d", deadlocks.Load())
}

func TestWriterNotStarvedByReaders(t *testing.T) {
	n := localNode(t)
	r1, w, r2 := newHolder(t, n), newHolder(t, n), newHolder(t, n)
	ctx := context.Background()
	if err := r1.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	wch := lockAsync(ctx, w, Exclusive, "k")
	eventually(t, "writer queued", func() bool { _, _, q := n.table.snapshot("k"); return q == 1 })
	// A reader arriving while the writer waits must queue behind it.
	r2ch := lockAsync(ctx, r2, Shared, "k")
	eventually(t, "second reader queued", func() bool { _, _, q := n.table.snapshot("k"); return q == 2 })
	mustNotReturn(t, wch, "writer")
	mustNotReturn(t, r2ch, "late reader")
	r1.Release("k")
	if err := recv(t, wch, "writer"); err != nil {
		t.Fatal(err)
	}
	mustNotReturn(t, r2ch, "late reader while the writer holds")
	w.Release("k")
	if err := recv(t, r2ch, "late reader"); err != nil {
		t.Fatal(err)
	}
}

// A stream of overlapping readers never leaves the key free, yet a writer
// gets it.
func TestWriterNotStarvedByReaderStream(t *testing.T) {
	n := localNode(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := newHolder(t, n)
			for j := 0; j < 100000 && !stop.Load(); j++ {
				if err := h.Lock(context.Background(), Shared, "k"); err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				time.Sleep(100 * time.Microsecond)
				h.Release("k")
			}
		}()
	}
	eventually(t, "readers running", func() bool { return reads.Load() > 100 })
	w := newHolder(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := w.Lock(ctx, Exclusive, "k")
	stop.Store(true)
	w.Close() // the readers queued behind the writer go on
	wg.Wait()
	if err != nil {
		t.Fatalf("writer starved by readers: %v", err)
	}
}

func TestGrantsInTicketOrder(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	h0 := newHolder(t, n)
	if err := h0.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	var order []int
	var mu sync.Mutex
	var chs []chan error
	hs := make([]*Holder, 5)
	for i := range hs {
		hs[i] = newHolder(t, n)
		ch := make(chan error, 1)
		go func(i int) {
			err := hs[i].Lock(ctx, Exclusive, "k")
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			ch <- err
		}(i)
		chs = append(chs, ch)
		eventually(t, "queued", func() bool { _, _, q := n.table.snapshot("k"); return q == i+1 })
	}
	h0.Release("k")
	for i := range hs {
		if err := recv(t, chs[i], fmt.Sprint("holder ", i)); err != nil {
			t.Fatal(err)
		}
		hs[i].Release("k")
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("grant order %v, want ticket order", order)
		}
	}
}

func TestQueuedRequestWithdrawnOnContextEnd(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	r1, w, r2 := newHolder(t, n), newHolder(t, n), newHolder(t, n)
	if err := r1.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wch := lockAsync(wctx, w, Exclusive, "k")
	eventually(t, "writer queued", func() bool { _, _, q := n.table.snapshot("k"); return q == 1 })
	r2ch := lockAsync(ctx, r2, Shared, "k")
	eventually(t, "reader queued", func() bool { _, _, q := n.table.snapshot("k"); return q == 2 })
	wcancel()
	if err := recv(t, wch, "withdrawn writer"); !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn writer: %v, want context.Canceled", err)
	}
	// The reader behind the withdrawn writer joins the first one.
	if err := recv(t, r2ch, "reader behind the writer"); err != nil {
		t.Fatal(err)
	}
	if m, h, q := n.table.snapshot("k"); m != Shared || h != 2 || q != 0 {
		t.Fatalf("after withdrawal: %v %d holders %d queued, want shared 2 0", m, h, q)
	}
	// A deadline works the same way, and the holder keeps what it held.
	if err := w.Lock(ctx, Exclusive, "other"); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	if err := w.Lock(dctx, Exclusive, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock past deadline: %v", err)
	}
	if m, h, _ := n.table.snapshot("other"); m != Exclusive || h != 1 {
		t.Fatalf("holder lost what it held: %v %d", m, h)
	}
	if _, _, q := n.table.snapshot("k"); q != 0 {
		t.Fatalf("%d requests still queued after the deadline", q)
	}
}

func TestHolderCloseAndContextEndRelease(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	hctx, hcancel := context.WithCancel(ctx)
	h, err := n.NewHolder(hctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Lock(ctx, Exclusive, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := h.Lock(ctx, Shared, "c"); err != nil {
		t.Fatal(err)
	}
	other := newHolder(t, n)
	if err := other.Lock(ctx, Exclusive, "x"); err != nil {
		t.Fatal(err)
	}
	queued := lockAsync(ctx, h, Exclusive, "x")
	eventually(t, "queued", func() bool { _, _, q := n.table.snapshot("x"); return q == 1 })
	hcancel()
	if err := recv(t, queued, "queued request of a dead holder"); !errors.Is(err, ErrClosed) {
		t.Fatalf("queued request of a dead holder: %v, want ErrClosed", err)
	}
	for _, k := range []string{"a", "b", "c"} {
		k := k
		eventually(t, k+" free", func() bool { _, hs, _ := n.table.snapshot(k); return hs == 0 })
	}
	if err := h.Lock(ctx, Shared, "z"); !errors.Is(err, ErrClosed) {
		t.Fatalf("lock on a closed holder: %v", err)
	}
	other.Close()
	if _, hs, _ := n.table.snapshot("x"); hs != 0 {
		t.Fatal("closed holder still holds x")
	}
}

func TestUpgradeAndReentry(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	a, b := newHolder(t, n), newHolder(t, n)
	if err := a.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Lock(ctx, Exclusive, "k"); err != nil {
		t.Fatalf("sole reader upgrade: %v", err)
	}
	if m, h, _ := n.table.snapshot("k"); m != Exclusive || h != 1 {
		t.Fatalf("after upgrade: %v %d", m, h)
	}
	a.Release("k")
	if err := a.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, Shared, "k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Lock(ctx, Exclusive, "k"); !errors.Is(err, ErrUpgrade) {
		t.Fatalf("shared upgrade: %v, want ErrUpgrade", err)
	}
	if m, h, _ := n.table.snapshot("k"); m != Shared || h != 2 {
		t.Fatalf("after refused upgrade: %v %d", m, h)
	}
	if err := a.Lock(ctx, 9, "k"); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad mode: %v", err)
	}
}

// Two holders on one node closing a cycle: exactly one ErrDeadlock, for the
// younger, which keeps what it held; the older one gets its lock.
func TestLocalDeadlockYoungerLoses(t *testing.T) {
	n := localNode(t)
	ctx := context.Background()
	old := newHolder(t, n)
	young := newHolder(t, n)
	if err := old.Lock(ctx, Exclusive, "a"); err != nil {
		t.Fatal(err)
	}
	if err := young.Lock(ctx, Exclusive, "b"); err != nil {
		t.Fatal(err)
	}
	oldch := lockAsync(ctx, old, Exclusive, "b")
	eventually(t, "old queued", func() bool { _, _, q := n.table.snapshot("b"); return q == 1 })
	youngErr := young.Lock(ctx, Exclusive, "a")
	if !errors.Is(youngErr, ErrDeadlock) {
		t.Fatalf("younger holder: %v, want ErrDeadlock", youngErr)
	}
	mustNotReturn(t, oldch, "older holder while the younger holds b")
	if m, h, _ := n.table.snapshot("b"); m != Exclusive || h != 1 {
		t.Fatalf("younger holder lost b: %v %d", m, h)
	}
	young.ReleaseAll()
	if err := recv(t, oldch, "older holder"); err != nil {
		t.Fatalf("older holder: %v", err)
	}
}
