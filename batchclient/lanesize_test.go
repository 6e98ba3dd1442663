package batchclient_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// runLog counts, per operation id, how often the server ran it.
type runLog struct{ runs []atomic.Int32 }

// RunArgs names one operation.
type RunArgs struct{ ID int64 }

// RunReply echoes the id.
type RunReply struct{ ID int64 }

// Run records a call or a cast.
func (r *runLog) Run(_ context.Context, a *RunArgs, rep *RunReply) error {
	r.runs[a.ID].Add(1)
	rep.ID = a.ID
	return nil
}

// keySeqs checks, per key, that sends arrive in the order they were made.
type keySeqs struct {
	mu       sync.Mutex
	last     map[uint32]uint32
	outOrder int
}

func (k *keySeqs) handle(_ context.Context, b []byte) {
	key, seq := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	k.mu.Lock()
	if seq != k.last[key]+1 {
		k.outOrder++
	}
	k.last[key] = seq
	k.mu.Unlock()
}

// startRunServer serves runLog (as "Run") and the "seq" send handler with a
// pool of poolSize lanes.
func startRunServer(t *testing.T, poolSize, ops int, opts ...batchserver.Option) (string, *runLog, *keySeqs) {
	t.Helper()
	s := server.NewServer()
	p, err := batchserver.New(s, append([]batchserver.Option{batchserver.WithPoolSize(poolSize)}, opts...)...)
	require.NoError(t, err)
	log := &runLog{runs: make([]atomic.Int32, ops)}
	require.NoError(t, s.RegisterName("Run", log, ""))
	seqs := &keySeqs{last: map[uint32]uint32{}}
	require.NoError(t, p.HandleSend("seq", seqs.handle))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, log, seqs
}

// Lanes come and go with a load that swings between 1,000 callers and 2,
// while calls, casts and keyed sends flow: none is lost, failed or run
// twice, and no key's sends arrive out of order.
func TestLanesFollowSwingingLoad(t *testing.T) {
	const (
		ops        = 2_000_000
		heavy      = 1000
		senders    = 100 // the first callers also send, each under its own key
		cycles     = 4
		heavyPhase = 300 * time.Millisecond
		lightPhase = 250 * time.Millisecond
		perCaller  = 400 // bound on a caller's operations in one phase
	)
	// A window of 200 entries a lane: 1,000 callers saturate a lane by it
	// however slow the machine (the race detector), and 2 never do.
	addr, log, seqs := startRunServer(t, 4, ops, batchserver.WithWindow(200))
	reg := metrics.NewRegistry()
	c := newClient(t, batchclient.WithLaneRange(1, 4), batchclient.WithLaneIdle(30*time.Millisecond),
		batchclient.WithMetrics(reg))
	waitConnected(t, c, addr)

	var nextID atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	sendSeq := make([]uint32, senders)
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	// op runs one call, one cast and, for a sender, one keyed send.
	op := func(ctx context.Context, g int) {
		id := nextID.Add(1)
		var r RunReply
		if err := c.Call(ctx, addr, "Run", "Run", &RunArgs{ID: id}, &r); err != nil || r.ID != id {
			fail(fmt.Errorf("call %d: %v (reply %d)", id, err, r.ID))
		}
		if err := c.Cast(ctx, addr, "Run", "Run", &RunArgs{ID: nextID.Add(1)}); err != nil {
			fail(fmt.Errorf("cast: %w", err))
		}
		if g < senders {
			sendSeq[g]++
			b := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(g)), sendSeq[g])
			if err := c.Send(batchclient.WithKey(ctx, fmt.Sprint("key", g)), addr, "seq", b); err != nil {
				sendSeq[g]-- // not sent: the next one takes its number
				fail(fmt.Errorf("send: %w", err))
			}
		}
	}
	phase := func(callers int, d time.Duration, pause time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for g := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perCaller && time.Now().Before(end); i++ {
					op(ctx, g)
					if pause > 0 {
						time.Sleep(pause)
					}
				}
			}()
		}
		wg.Wait()
	}
	maxLanes := 0
	for range cycles {
		phase(heavy, heavyPhase, 0)
		maxLanes = max(maxLanes, c.Info(addr).Lanes)
		phase(2, lightPhase, time.Millisecond)
	}
	require.Zero(t, failed.Load(), "first failure: %v", firstErr.Load())

	// Casts and sends run after their callers return: wait for them.
	n := nextID.Load()
	deadline := time.Now().Add(20 * time.Second)
	for {
		missing := 0
		for id := int64(1); id <= n; id++ {
			if log.runs[id].Load() == 0 {
				missing++
			}
		}
		seqs.mu.Lock()
		sendsDone := true
		for g := range senders {
			if seqs.last[uint32(g)] != sendSeq[g] {
				sendsDone = false
			}
		}
		seqs.mu.Unlock()
		if missing == 0 && sendsDone {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d calls and casts never ran; sends done: %v", missing, n, sendsDone)
		time.Sleep(20 * time.Millisecond)
	}
	twice := 0
	for id := int64(1); id <= n; id++ {
		if log.runs[id].Load() > 1 {
			twice++
		}
	}
	seqs.mu.Lock()
	outOfOrder := seqs.outOrder
	seqs.mu.Unlock()
	added := reg.Get("rpcxbatch.client.lanes.added").(metrics.Counter).Count()
	retired := reg.Get("rpcxbatch.client.lanes.retired").(metrics.Counter).Count()
	t.Logf("%d operations; lanes added %d, retired %d, at most %d open", n, added, retired, maxLanes)
	assert.Zero(t, twice, "operations run twice")
	assert.Zero(t, outOfOrder, "sends out of order")
	// The scenario under test: lanes were added and retired, repeatedly.
	assert.GreaterOrEqual(t, added, int64(cycles), "lanes added")
	assert.GreaterOrEqual(t, retired, int64(cycles-1), "lanes retired")
}

// Sends under 300 keys, each from its own goroutine, while the pool grows
// and shrinks under them: every key's sends arrive in order. A sender that
// picked its key's old lane a moment before a change must not land its
// send there after the change's fence (found by batchserver's
// TestSendsArriveInOrderPerKey once lanes followed the load).
func TestKeyedSendsKeepOrderAcrossChanges(t *testing.T) {
	const (
		senders = 300
		perKey  = 300
		cycles  = 5
	)
	addr, _, seqs := startRunServer(t, 4, 1, batchserver.WithWindow(100))
	reg := metrics.NewRegistry()
	c := newClient(t, batchclient.WithLaneRange(1, 4), batchclient.WithLaneIdle(20*time.Millisecond),
		batchclient.WithMetrics(reg))
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent := make([]uint32, senders)
	for cycle := range cycles {
		var wg sync.WaitGroup
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				kctx := batchclient.WithKey(ctx, fmt.Sprint("sender-", g))
				for range perKey / cycles {
					sent[g]++
					b := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(g)), sent[g])
					if err := c.Send(kctx, addr, "seq", b); err != nil {
						t.Errorf("cycle %d key %d send %d: %v", cycle, g, sent[g], err)
						return
					}
				}
			}()
		}
		wg.Wait()
		// Quiet: the pool shrinks before the next burst.
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		seqs.mu.Lock()
		done := 0
		for g := range senders {
			if seqs.last[uint32(g)] == sent[g] {
				done++
			}
		}
		outOfOrder := seqs.outOrder
		seqs.mu.Unlock()
		if done == senders || outOfOrder > 0 || time.Now().After(deadline) {
			added := reg.Get("rpcxbatch.client.lanes.added").(metrics.Counter).Count()
			retired := reg.Get("rpcxbatch.client.lanes.retired").(metrics.Counter).Count()
			t.Logf("lanes added %d, retired %d; %d of %d keys complete", added, retired, done, senders)
			require.Zero(t, outOfOrder, "sends out of order")
			require.Equal(t, senders, done, "keys whose sends all arrived")
			require.Positive(t, added, "lanes added")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
