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
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// serveKeyedOrder serves the keyed-send order tests' server on loopback:
// a batch plugin announcing pool lanes with a window of window entries,
// Run.Run for the casts, and the "seq" send handler slowSeqs, each send
// taking delay. It returns the address and the handler's record.
func serveKeyedOrder(t *testing.T, pool, window int, delay time.Duration) (string, *slowSeqs) {
	t.Helper()
	s := server.NewServer()
	p, err := batchserver.New(s, batchserver.WithPoolSize(pool), batchserver.WithWindow(window))
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Run", &runLog{runs: make([]atomic.Int32, 1)}, ""))
	seqs := &slowSeqs{delay: delay, last: map[uint32]uint32{}, running: map[uint32]int{}}
	require.NoError(t, p.HandleSend("seq", seqs.handle))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, seqs
}

// keyedLoad is the load of the keyed-send order tests: keys senders, each
// under a key of its own, send perKey sends (its key and a sequence
// number, for slowSeqs) over cycles, while casters goroutines cast Run.Run
// beside them (up to casts each a cycle, stopped when the cycle's sends
// are in). between runs after each cycle.
type keyedLoad struct {
	keys, perKey, cycles, casters, casts int
	between                              func()
}

// run drives the load through c to addr and returns the last sequence
// number sent under each key.
func (k keyedLoad) run(t *testing.T, ctx context.Context, c *batchclient.Client, addr string) []uint32 {
	t.Helper()
	sent := make([]uint32, k.keys)
	for range k.cycles {
		var wg, cwg sync.WaitGroup
		var stopCasts atomic.Bool
		for range k.casters {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				for i := 0; i < k.casts && !stopCasts.Load(); i++ {
					if err := c.Cast(ctx, addr, "Run", "Run", &RunArgs{ID: 0}); err != nil {
						t.Errorf("cast: %v", err)
						return
					}
				}
			}()
		}
		for g := range k.keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				kctx := batchclient.WithKey(ctx, fmt.Sprint("key-", g))
				for range k.perKey / k.cycles {
					sent[g]++
					b := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(g)), sent[g])
					if err := c.Send(kctx, addr, "seq", b); err != nil {
						t.Errorf("send: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		stopCasts.Store(true)
		cwg.Wait()
		k.between()
	}
	return sent
}

// requireKeyedOrder waits (up to 20 s) for every key's last send to
// arrive, then requires that none came out of order, that no two of a
// key's ran at once, and that the pool did change lanes (reg is the
// client's metrics).
func requireKeyedOrder(t *testing.T, seqs *slowSeqs, sent []uint32, reg metrics.Registry) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		seqs.mu.Lock()
		done := 0
		for g := range sent {
			if seqs.last[uint32(g)] == sent[g] {
				done++
			}
		}
		o, ov := seqs.outOrder, seqs.overlap
		seqs.mu.Unlock()
		if done == len(sent) || time.Now().After(deadline) {
			added := reg.Get("rpcxbatch.client.lanes.added").(metrics.Counter).Count()
			retired := reg.Get("rpcxbatch.client.lanes.retired").(metrics.Counter).Count()
			t.Logf("lanes added %d, retired %d; out of order %d, overlapping %d", added, retired, o, ov)
			require.Zero(t, o, "sends out of order")
			require.Zero(t, ov, "a key's sends ran at once")
			require.Equal(t, len(sent), done, "keys whose sends all arrived")
			require.Positive(t, added, "lanes added: the test did not test a change")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
