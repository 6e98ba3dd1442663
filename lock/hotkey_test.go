package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHotKeyTwoNodesFewDeadlocks: 200 holders, half on each node, take one
// hot key exclusively on both nodes, over and over. Asking both nodes at
// once lets two requests each be granted on one node and wait on the
// other: a deadlock, detected and retried, on nearly every round. Asking
// the nodes in one order for every holder (the first, then the rest)
// means a request waits on the first node holding nothing, so no such
// cycle forms. The invariant (one exclusive holder at a time) must hold
// throughout, and the retries must stay a small share of the rounds. A
// holder holds one key, so no cycle is real: before the walk asked the
// holder's node about a hold released already whose release is still on
// its way to the second node (issue 15), that made 1 to 9 retries a run
// under the race detector; since, none in 163 runs of 165, one in two.
// Then a walk from a request granted as it started read the request's
// own hold as its blocker, a cycle of one (in 2 of 3 runs, seen with
// traces), whose verdict, named by ticket, could fail the holder's next
// request there if it queued with the same ticket. Since that was fixed
// (TestGrantedWaiterBlocksNobody, TestLateVerdictFailsOnlyItsOwnRequest)
// a traced build declared no cycle here in 300 runs.
func TestHotKeyTwoNodesFewDeadlocks(t *testing.T) {
	// 200 holders on one key keep both cores busy under the race
	// detector, and the nodes' pings then missed the default NodeTimeout
	// (2 s) now and then: a node declared lost is not what this test is
	// about.
	a, b := servePairTimeout(t, false, 15*time.Second)
	nodes := []string{a.Addr(), b.Addr()}
	const holders, rounds = 200, 2
	g := newGrantBook(t, a, b)
	var done, retries, failures atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(90 * time.Second)
	var wg sync.WaitGroup
	for w := range holders {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h := newHolder(t, []*Node{a, b}[w%2])
			// Half the holders name the nodes the other way round: the
			// order must not depend on how the caller lists them.
			mine := nodes
			if w%4 >= 2 {
				mine = []string{nodes[1], nodes[0]}
			}
			for i := 0; i < rounds && time.Now().Before(stop); i++ {
				ctx, cancel := context.WithDeadline(context.Background(), stop)
				err := h.LockOn(ctx, mine, Exclusive, "hot")
				cancel()
				if errors.Is(err, ErrDeadlock) {
					retries.Add(1)
					i--
					continue
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				g.granted(h, mine, Exclusive, "hot")
				g.releasing(h)
				h.Release("hot")
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	g.check()
	t.Logf("%d rounds done, %d deadlock retries, %d failures, lost holders %d/%d", done.Load(), retries.Load(), failures.Load(), a.Stats().LostHolders, b.Stats().LostHolders)
	if failures.Load() != 0 {
		t.Fatalf("%d requests failed; first: %v", failures.Load(), firstErr.Load())
	}
	if done.Load() != holders*rounds {
		t.Fatalf("%d of %d rounds done within 90 s (%d deadlock retries)", done.Load(), holders*rounds, retries.Load())
	}
	// A retry now and then is allowed; one per ten rounds is not.
	if r := retries.Load(); r > holders*rounds/10 {
		t.Fatalf("%d deadlock retries for %d rounds: a hot key on two nodes deadlocks with itself", r, holders*rounds)
	}
	eventually(t, "hot free on both nodes", func() bool { return freeOn(a, "hot") && freeOn(b, "hot") })
}
