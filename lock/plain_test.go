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

// The same two-node scenarios over rpcxbatch and over plain rpcx, side by
// side: the lock service behaves the same on both transports.
func TestSameOverPlainAndBatch(t *testing.T) {
	for _, plain := range []bool{false, true} {
		name := "batch"
		if plain {
			name = "plain"
		}
		t.Run(name+"/invariant", func(t *testing.T) {
			a, b := servePair(t, plain)
			nodes := []string{a.Addr(), b.Addr()}
			var g guard
			var wg sync.WaitGroup
			var rounds atomic.Int64
			stop := time.Now().Add(20 * time.Second)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					home := []*Node{a, b}[w%2]
					h := newHolder(t, home)
					r := rand.New(rand.NewPCG(uint64(w), 5))
					for i := 0; i < 30 && time.Now().Before(stop); i++ {
						m := []Mode{Shared, Exclusive}[r.IntN(2)]
						err := h.LockOn(context.Background(), nodes, m, "k")
						if errors.Is(err, ErrDeadlock) {
							i--
							continue
						}
						if err != nil {
							t.Errorf("lock: %v", err)
							return
						}
						g.enter(m)
						g.leave(m)
						h.Release("k")
						rounds.Add(1)
					}
				}(w)
			}
			wg.Wait()
			if g.bad.Load() != 0 {
				t.Fatalf("invariant broken %d times", g.bad.Load())
			}
			eventually(t, "k free", func() bool { return freeOn(a, "k") && freeOn(b, "k") })
		})
		t.Run(name+"/deadlock", func(t *testing.T) {
			a, b := servePair(t, plain)
			ctx := context.Background()
			h1, h2 := newHolder(t, a), newHolder(t, b)
			both := []string{a.Addr(), b.Addr()}
			if err := h1.LockOn(ctx, both, Exclusive, "p"); err != nil {
				t.Fatal(err)
			}
			if err := h2.LockOn(ctx, both, Exclusive, "q"); err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 2)
			for _, x := range []struct {
				h *Holder
				k string
			}{{h1, "q"}, {h2, "p"}} {
				go func(h *Holder, k string) {
					err := h.LockOn(ctx, both, Exclusive, k)
					if err != nil {
						h.ReleaseAll()
					}
					errs <- err
				}(x.h, x.k)
			}
			var dl []error
			for i := 0; i < 2; i++ {
				if err := recv(t, errs, "cycle request"); err != nil {
					dl = append(dl, err)
				}
			}
			if len(dl) != 1 || !errors.Is(dl[0], ErrDeadlock) {
				t.Fatalf("errors %v, want exactly one ErrDeadlock", dl)
			}
		})
	}
}

// BenchmarkDesign1 is elock's design 1 in one process: every op takes one
// exclusive lock on a random key of a large pool on both nodes, and
// releases it; holders are spread over both nodes. Over rpcxbatch and over
// plain rpcx. Run with -cpu 2; parallelism 500 makes 1,000 holders.
func BenchmarkDesign1(b *testing.B) {
	for _, plain := range []bool{false, true} {
		name := "batch"
		if plain {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			na, nb := servePair(b, plain)
			nodes := []string{na.Addr(), nb.Addr()}
			var ids, retries atomic.Int64
			b.SetParallelism(500)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := ids.Add(1)
				home := []*Node{na, nb}[id%2]
				h, err := home.NewHolder(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				defer h.Close()
				r := rand.New(rand.NewPCG(uint64(id), 7))
				for pb.Next() {
					key := fmt.Sprint("obj", r.IntN(5_000_000))
					for {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						err := h.LockOn(ctx, nodes, Exclusive, key)
						cancel()
						if errors.Is(err, ErrDeadlock) {
							retries.Add(1)
							continue
						}
						if err != nil {
							b.Error(err)
							return
						}
						break
					}
					h.Release(key)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "locks/s")
			b.ReportMetric(float64(retries.Load()), "deadlock-retries")
		})
	}
}

// BenchmarkDesign3 is elock's design 3 in one process: a transaction takes
// ten keys of a large pool, one request per key in random order,
// exclusively on both nodes, then releases them all; a transaction that
// meets ErrDeadlock releases everything and starts over. One op is one
// transaction; locks/s counts its ten keys.
func BenchmarkDesign3(b *testing.B) {
	for _, plain := range []bool{false, true} {
		name := "batch"
		if plain {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			na, nb := servePair(b, plain)
			nodes := []string{na.Addr(), nb.Addr()}
			var ids, restarts atomic.Int64
			b.SetParallelism(100)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := ids.Add(1)
				h, err := []*Node{na, nb}[id%2].NewHolder(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				defer h.Close()
				r := rand.New(rand.NewPCG(uint64(id), 9))
				for pb.Next() {
					var keys [10]string
					for i := range keys {
						keys[i] = fmt.Sprint("obj", r.IntN(5_000_000))
					}
				txn:
					for {
						for _, k := range keys {
							ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
							err := h.LockOn(ctx, nodes, Exclusive, k)
							cancel()
							if errors.Is(err, ErrDeadlock) {
								restarts.Add(1)
								h.ReleaseAll()
								continue txn
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
						break
					}
					h.ReleaseAll()
				}
			})
			b.ReportMetric(float64(b.N)*10/b.Elapsed().Seconds(), "locks/s")
			b.ReportMetric(float64(restarts.Load())/float64(b.N), "restarts/txn")
		})
	}
}
