package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/lock"
)

// elock's designs, as its benchmark runs them (see the README's lock
// section): every client is a holder on this node and runs Txns
// transactions, or stops at the deadline.
//
//	design 1  one exclusive lock on both nodes per transaction, on a key
//	          drawn from the pool; ErrDeadlock is retried and counted
//	design 3  ten keys drawn from the pool, locked one request at a time
//	          in random order, exclusively on both nodes; a transaction
//	          that meets ErrDeadlock releases everything and restarts
//	design 4  ten shared locks on this node, on keys no other client
//	          touches

// tally is what a point's clients did, summed.
type tally struct {
	locks, txns, retries, restarted, errs atomic.Int64
	bounded                               atomic.Bool
	mu                                    sync.Mutex
	first                                 error
}

func (t *tally) fail(err error) {
	t.errs.Add(1)
	t.mu.Lock()
	if t.first == nil {
		t.first = err
	}
	t.mu.Unlock()
}

func (t *tally) result() NodeResult {
	r := NodeResult{Locks: t.locks.Load(), Txns: t.txns.Load(), Retries: t.retries.Load(),
		RestartedTxns: t.restarted.Load(), Errors: t.errs.Load(), Bounded: t.bounded.Load()}
	if t.first != nil {
		r.FirstError = t.first.Error()
	}
	return r
}

// lockClients are holders on this node.
type lockClients struct {
	sp      Spec
	holders []*lock.Holder
}

func newLockClients(ctx context.Context, n *lock.Node, sp Spec) (*lockClients, error) {
	if sp.Design != 1 && sp.Design != 3 && sp.Design != 4 {
		return nil, fmt.Errorf("no design %d (1, 3 or 4)", sp.Design)
	}
	lc := &lockClients{sp: sp, holders: make([]*lock.Holder, sp.Clients)}
	for i := range lc.holders {
		h, err := n.NewHolder(ctx)
		if err != nil {
			lc.close()
			return nil, err
		}
		lc.holders[i] = h
	}
	return lc, nil
}

func (lc *lockClients) close() {
	for _, h := range lc.holders {
		if h != nil {
			h.Close()
		}
	}
}

func (lc *lockClients) run(deadline time.Time) *tally {
	t := &tally{}
	runClients(lc.sp, len(lc.holders), deadline, func(ctx context.Context, i int, r *rand.Rand) {
		h := lc.holders[i]
		switch lc.sp.Design {
		case 1:
			design1(ctx, h, lc.sp, r, t)
		case 3:
			design3(ctx, h, lc.sp, r, t)
		case 4:
			design4(ctx, h, lc.sp, i, t)
		}
	})
	return t
}

// runClients runs client once for each of n clients, i from 0 to n-1, on
// a goroutine each, and returns when all have returned. Each gets a
// context of its own that ends at deadline, as an actor has its own: one
// shared by 10,000 clients makes its mutex (every request's context
// derives from it) the point's bottleneck. Each gets its own random
// source too, seeded from sp's seed, its node and i.
func runClients(sp Spec, n int, deadline time.Time, client func(ctx context.Context, i int, r *rand.Rand)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			client(ctx, i, rand.New(rand.NewPCG(sp.Seed, uint64(sp.NodeID)<<32|uint64(i))))
		})
	}
	wg.Wait()
}

func poolKey(r *rand.Rand, pool int) string {
	// One allocation, the string itself: the harness's own cost is part of
	// the CPU a lock is charged with.
	var b [24]byte
	return string(strconv.AppendInt(append(b[:0], "obj"...), int64(r.IntN(pool)), 10))
}

// stopped reports whether err is the point's deadline, and marks the
// point bounded if so.
func stopped(ctx context.Context, err error, t *tally) bool {
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		t.bounded.Store(true)
		return true
	}
	return false
}

func design1(ctx context.Context, h *lock.Holder, sp Spec, r *rand.Rand, t *tally) {
	for range sp.Txns {
		key := poolKey(r, sp.Pool)
		for {
			err := h.LockOn(ctx, sp.Nodes, lock.Exclusive, key)
			if errors.Is(err, lock.ErrDeadlock) {
				t.retries.Add(1)
				continue
			}
			if stopped(ctx, err, t) {
				return
			}
			if err != nil {
				t.fail(err)
				break
			}
			h.Release(key)
			t.locks.Add(1)
			t.txns.Add(1)
			break
		}
	}
}

func design3(ctx context.Context, h *lock.Holder, sp Spec, r *rand.Rand, t *tally) {
	var keys [10]string
	for range sp.Txns {
		for i := range keys {
			keys[i] = poolKey(r, sp.Pool)
		}
		restarted := false
	txn:
		for {
			for _, k := range keys {
				err := h.LockOn(ctx, sp.Nodes, lock.Exclusive, k)
				if errors.Is(err, lock.ErrDeadlock) {
					t.retries.Add(1)
					restarted = true
					h.ReleaseAll()
					continue txn
				}
				if stopped(ctx, err, t) {
					h.ReleaseAll()
					return
				}
				if err != nil {
					t.fail(err)
					h.ReleaseAll()
					break txn
				}
			}
			h.ReleaseAll()
			t.locks.Add(int64(len(keys)))
			t.txns.Add(1)
			break
		}
		if restarted {
			t.restarted.Add(1)
		}
	}
}

func design4(ctx context.Context, h *lock.Holder, sp Spec, client int, t *tally) {
	var keys [10]string
	for i := range keys {
		keys[i] = fmt.Sprintf("n%d/c%d/tag%d", sp.NodeID, client, i)
	}
	var done int64
	// Counted once at the end: ten atomic adds per transaction on shared
	// counters would measure the counters, not the locks.
	defer func() {
		t.locks.Add(10 * done)
		t.txns.Add(done)
	}()
	for i := range sp.Txns {
		if i%64 == 0 && ctx.Err() != nil {
			t.bounded.Store(true)
			return
		}
		if err := h.Lock(ctx, lock.Shared, keys[:]...); err != nil {
			if !stopped(ctx, err, t) {
				t.fail(err)
			}
			return
		}
		h.ReleaseAll()
		done++
	}
}
