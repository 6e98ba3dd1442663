package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Chaos on two nodes: random node sets, keys, modes, short deadlines,
// upgrades, Release / ReleaseAll / Close. A grantBook checks that what
// the holders are told they hold is never two writers or a writer beside
// readers, on any node; at the end nothing is left behind.
func TestChaosInvariant(t *testing.T) {
	a, b := serveNode(t), serveNode(t)
	nodes := []*Node{a, b}
	addrs := []string{a.Addr(), b.Addr()}
	const keys, workers = 3, 16
	g := newGrantBook(t, a, b)
	var rounds, fails atomic.Int64
	stop := time.Now().Add(15 * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			home := nodes[w%2]
			h, _ := home.NewHolder(context.Background())
			for i := 0; i < 400 && time.Now().Before(stop); i++ {
				var nis []int
				switch r.IntN(3) {
				case 0:
					nis = []int{0}
				case 1:
					nis = []int{1}
				default:
					nis = []int{0, 1}
				}
				var ns []string
				for _, ni := range nis {
					ns = append(ns, addrs[ni])
				}
				nk := 1 + r.IntN(2)
				var ks []string
				for j := 0; j < nk; j++ {
					ks = append(ks, fmt.Sprint("k", r.IntN(keys)))
				}
				if nk == 2 && ks[0] == ks[1] {
					ks = ks[:1]
				}
				m := Shared
				if r.IntN(2) == 0 {
					m = Exclusive
				}
				d := time.Duration(1+r.IntN(50)) * time.Millisecond
				if r.IntN(4) == 0 {
					d = 5 * time.Second
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				err := h.LockOn(ctx, ns, m, ks...)
				cancel()
				if err != nil {
					fails.Add(1)
					continue
				}
				g.granted(h, ns, m, ks...)
				if m == Shared && r.IntN(3) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+r.IntN(50))*time.Millisecond)
					// Leave first: after the upgrade we are a writer; a
					// failed upgrade leaves us a reader again.
					err := h.LockOn(ctx, ns, Exclusive, ks...)
					cancel()
					if err == nil {
						g.granted(h, ns, Exclusive, ks...)
					}
				}
				time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
				switch r.IntN(3) {
				case 0:
					g.releasing(h, ks...)
					h.Release(ks...)
				case 1:
					g.releasing(h)
					h.ReleaseAll()
				default:
					g.releasing(h)
					h.Close()
					h, _ = home.NewHolder(context.Background())
				}
				rounds.Add(1)
			}
			h.Close()
		}(w)
	}
	wg.Wait()
	g.check()
	for _, n := range nodes {
		for k := 0; k < keys; k++ {
			key := fmt.Sprint("k", k)
			if !waitFor(func() bool { return freeOn(n, key) }) {
				t.Errorf("%s left behind on %s: %s", key, n.Addr(), dump(n, key))
			}
		}
	}
	t.Logf("%d rounds, %d failed requests", rounds.Load(), fails.Load())
}
