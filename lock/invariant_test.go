package lock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// grantBook is the invariant checker of the contention tests: it keeps,
// for every node and key, the holders that were told they hold the key
// there and in which mode, and checks each grant at the moment its holder
// is told (Lock or LockOn returned nil) against every other holder of that
// key on that node, on every node of the request. A holder leaves the
// book before it releases (so a grant after its release is no conflict).
// It also reads the node's own table row: a holder told Exclusive must be
// the row's only holder, in Exclusive mode.
//
// Never two Exclusive holders, never a writer beside readers: README,
// "Guarantees".
type grantBook struct {
	t     testing.TB
	nodes map[string]*Node // by address: the nodes whose rows it reads

	mu   sync.Mutex // guards what follows
	held map[grantKey]map[*Holder]Mode
	// of is where each holder holds each key, for its ReleaseAll.
	of     map[*Holder]map[grantKey]struct{}
	bad    []string // the first violations, for the failure message
	nbad   int
	grants int
}

type grantKey struct {
	node, key string
}

func newGrantBook(t testing.TB, nodes ...*Node) *grantBook {
	g := &grantBook{t: t, nodes: map[string]*Node{}, held: map[grantKey]map[*Holder]Mode{}, of: map[*Holder]map[grantKey]struct{}{}}
	for _, n := range nodes {
		g.nodes[n.Addr()] = n
	}
	return g
}

// granted records that h was just told it holds keys in mode on nodes
// ("" or h's own address: its own node), and checks the grant.
func (g *grantBook) granted(h *Holder, nodes []string, mode Mode, keys ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grants++
	for _, nd := range nodes {
		if nd == "" {
			nd = h.n.Addr()
		}
		for _, k := range keys {
			gk := grantKey{nd, k}
			hs := g.held[gk]
			if hs == nil {
				hs = map[*Holder]Mode{}
				g.held[gk] = hs
			}
			if m, ok := hs[h]; ok && m == Exclusive {
				// Re-entry keeps the stronger mode.
				mode = Exclusive
			}
			for other, m := range hs {
				if other != h && (m == Exclusive || mode == Exclusive) {
					g.violate("%s granted %v on %s to holder %v while holder %v holds it %v (row there: %s)", k, mode, nd, h.ID(), other.ID(), m, g.row(nd, k))
				}
			}
			hs[h] = mode
			if g.of[h] == nil {
				g.of[h] = map[grantKey]struct{}{}
			}
			g.of[h][gk] = struct{}{}
			g.checkRow(h, nd, k, mode)
		}
	}
}

// checkRow checks node nd's row of key against a grant to h in mode.
// g.mu is held.
func (g *grantBook) checkRow(h *Holder, nd, key string, mode Mode) {
	n := g.nodes[nd]
	if n == nil {
		return
	}
	o := h.o
	if nd != h.n.Addr() {
		n.mu.RLock()
		o = n.proxies[h.ID()]
		n.mu.RUnlock()
		if o == nil {
			g.violate("%s granted %v on %s to holder %v, which has no proxy there", key, mode, nd, h.ID())
			return
		}
	}
	s, hh := n.table.shard(key)
	s.mu.Lock()
	r := s.rows.get(hh, key)
	ok := false
	if r != nil {
		for _, x := range r.owners {
			ok = ok || x == o
		}
		if mode == Exclusive && (r.mode != Exclusive || len(r.owners) != 1) {
			ok = false
		}
	}
	s.mu.Unlock()
	if !ok {
		g.violate("%s granted %v on %s to holder %v, but the row there is: %s", key, mode, nd, h.ID(), g.row(nd, key))
	}
}

func (g *grantBook) row(nd, key string) string {
	if n := g.nodes[nd]; n != nil {
		return dump(n, key)
	}
	return "(not read)"
}

// releasing forgets h's holds of keys (all of them when keys is empty)
// before h releases them.
func (g *grantBook) releasing(h *Holder, keys ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for gk := range g.of[h] {
		if len(keys) > 0 && !contains(keys, gk.key) {
			continue
		}
		delete(g.held[gk], h)
		if len(g.held[gk]) == 0 {
			delete(g.held, gk)
		}
		delete(g.of[h], gk)
	}
}

func (g *grantBook) violate(format string, args ...any) {
	g.nbad++
	if len(g.bad) < 5 {
		g.bad = append(g.bad, fmt.Sprintf(format, args...))
	}
}

// check fails the test if any grant broke the invariant, and returns the
// number of grants checked.
func (g *grantBook) check() int {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.nbad > 0 {
		g.t.Errorf("%d of %d grants broke the invariant; the first:\n%s", g.nbad, g.grants, strings.Join(g.bad, "\n"))
	}
	return g.grants
}

// soakFor is how long the soak below runs: LOCKTEST_SOAK (a duration),
// else 3 s.
func soakFor() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LOCKTEST_SOAK")); err == nil {
		return d
	}
	return 3 * time.Second
}

// The invariant under contention on two nodes over rpcxbatch, nothing
// injected. Writers of both nodes each own a set of keys: they take them
// Shared on both nodes, upgrade them to Exclusive on both (when that
// fails, they retry at once, as an application does), and release.
// Readers of both nodes read a few keys of any writer on their own node,
// which makes upgrades fail there; other holders fight over a few hot
// keys on both nodes (deadlocks). Requests end by deadline or by a cancel
// that the other node hears of only by the Abort. Every grant is checked
// by a grantBook at the moment its holder is told.
func TestInvariantTwoNodesUnderContention(t *testing.T) {
	a, _, _ := nodeWith(t, false, nil)
	b, _, _ := nodeWith(t, false, nil)
	g := newGrantBook(t, a, b)
	both := []string{a.Addr(), b.Addr()}
	hot := []string{"s0", "s1", "s2"}
	const writers, ownKeys = 4, 100
	own := make([][]string, writers)
	for w := range own {
		for k := range ownKeys {
			own[w] = append(own[w], fmt.Sprintf("w%d-%d", w, k))
		}
	}
	until := time.Now().Add(soakFor())
	var wg sync.WaitGroup
	var failures [16]atomic.Int64 // by code
	for i := range 2 * (writers/2 + 2 + 2) {
		n := a
		if i%2 == 1 {
			n = b
		}
		h := testHolder(t, n)
		rng := rand.New(rand.NewPCG(uint64(i), 32))
		// lock asks and records; a request that ends by a cancel reaches
		// the other node only by its Abort.
		lock := func(nodes []string, mode Mode, ks ...string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if rng.IntN(4) == 0 {
				stop := time.AfterFunc(time.Duration(rng.IntN(20))*time.Millisecond, cancel)
				defer stop.Stop()
			}
			var err error
			if len(nodes) == 1 && nodes[0] == "" {
				err = h.Lock(ctx, mode, ks...)
			} else {
				err = h.LockOn(ctx, nodes, mode, ks...)
			}
			if err == nil {
				g.granted(h, nodes, mode, ks...)
				return nil
			}
			c := codeOf(err)
			if c != codeDeadlock && c != codeUpgrade && c != codeTimeout && c != codeCanceled && c != codeProbeLimit {
				t.Errorf("holder %v: %v", h.ID(), err)
			}
			failures[c%16].Add(1)
			return err
		}
		var step func()
		switch role := i / 2; {
		case role < writers/2:
			// A writer (two per node, each with keys of its own).
			keys := own[i]
			step = func() {
				if lock(both, Shared, keys...) != nil {
					return
				}
				for range 3 {
					// Retried at once: the Abort of the failed one is on
					// its way.
					if lock(both, Exclusive, keys...) == nil {
						return
					}
				}
			}
		case role < writers/2+2:
			// A reader of its own node.
			step = func() {
				w := own[rng.IntN(writers)]
				if lock([]string{""}, Shared, w[rng.IntN(ownKeys)], w[rng.IntN(ownKeys)]) == nil {
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				}
			}
		default:
			// Hot keys on both nodes.
			step = func() {
				k1, k2 := hot[rng.IntN(len(hot))], hot[rng.IntN(len(hot))]
				if lock(both, Shared, k1) == nil && lock(both, Exclusive, k1, k2) != nil {
					_ = lock(both, Exclusive, k1, k2)
				}
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; time.Now().Before(until) && j < 1000000; j++ {
				step()
				g.releasing(h)
				h.ReleaseAll()
			}
		}()
	}
	wg.Wait()
	grants := g.check()
	t.Logf("%d grants checked in %v; failed requests: %d deadlock, %d upgrade, %d deadline, %d cancel, %d probe limit", grants, soakFor(),
		failures[codeDeadlock].Load(), failures[codeUpgrade].Load(), failures[codeTimeout].Load(), failures[codeCanceled].Load(), failures[codeProbeLimit].Load())
}
