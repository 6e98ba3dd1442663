package reliability_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// RollArgs names one call: the caller goroutine and its sequence number.
type RollArgs struct {
	ID uint64
}

// ledger counts the runs of every call id across all servers of one run,
// so a call that ran twice (a retry after its reply was lost) shows up.
type ledger struct {
	mu   sync.Mutex
	runs map[uint64]int
}

// Roller is the service of the rolling-restart test, one per server.
type Roller struct {
	ledger *ledger
	served atomic.Int64
}

// Do takes a moment, so that calls are in flight when a server shuts
// down, records the run and echoes the id.
func (r *Roller) Do(_ context.Context, a *RollArgs, out *RollArgs) error {
	time.Sleep(time.Duration(a.ID%3) * time.Millisecond)
	r.ledger.mu.Lock()
	r.ledger.runs[a.ID]++
	r.ledger.mu.Unlock()
	r.served.Add(1)
	out.ID = a.ID
	return nil
}

// rollServer serves a Roller at addr (from testenv.RestartAddr), with the
// batch plugin when batch is set. A restarted server that finds the port
// held still tries again for a few seconds.
func rollServer(t *testing.T, l *ledger, batch bool, addr string) (*server.Server, *Roller, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := server.NewServer()
		r := &Roller{ledger: l}
		require.NoError(t, s.RegisterName("Roll", r, ""))
		if batch {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		errc := make(chan error, 1)
		testsvc.NoJSONRPC(s)
		go func() { errc <- s.Serve("tcp", addr) }()
		for s.Address() == nil {
			select {
			case err := <-errc:
				require.True(t, time.Now().Before(deadline), "serving at %s: %v", addr, err)
				time.Sleep(20 * time.Millisecond)
			case <-time.After(time.Millisecond):
				continue
			}
			break
		}
		if a := s.Address(); a != nil {
			t.Cleanup(func() { s.Close() })
			return s, r, a.(*net.TCPAddr).String()
		}
	}
}

// rollResult is what one rolling restart saw.
type rollResult struct {
	calls, failed, ranTwice int64
	firstErrs               []string
	took                    time.Duration
	shutdowns               []time.Duration
}

// rollingRestart runs the scenario once: three servers, one XClient with
// client.Failover over a MultipleServersDiscovery, `callers` goroutines
// calling continuously, and each server in turn shut down gracefully
// (Shutdown with a context) and started again at the same address while
// the load runs. The load is bounded in calls per goroutine and in time.
func rollingRestart(t *testing.T, batch bool, callers int) rollResult {
	led := &ledger{runs: make(map[uint64]int)}
	servers := make([]*server.Server, 3)
	addrs := make([]string, 3)
	pairs := make([]*client.KVPair, 3)
	for i := range servers {
		// Not a port of the ephemeral range: while a server is down
		// another test's server could be given it, and the calls sent
		// there would fail with "rpcx: can't find service Roll".
		servers[i], _, addrs[i] = rollServer(t, led, batch, testenv.RestartAddr(t))
		pairs[i] = &client.KVPair{Key: "tcp@" + addrs[i]}
	}
	d, err := client.NewMultipleServersDiscovery(pairs)
	require.NoError(t, err)
	opt := client.DefaultOption
	// Failover tries another server drawn at random; enough tries that a
	// caller does not draw the restarting server every time. (With
	// RoundRobin, callers retrying in step can draw the same server at
	// every try.)
	opt.Retries, opt.RetryInterval = 20, 5*time.Millisecond
	var xc client.XClient
	if batch {
		xc = batchclient.NewXClient("Roll", client.Failover, client.RandomSelect, d, opt)
	} else {
		xc = client.NewXClient("Roll", client.Failover, client.RandomSelect, d, opt)
	}
	defer xc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var done, failed atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	const perCaller = 1_000_000
	var wg sync.WaitGroup
	start := time.Now()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perCaller {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				id := uint64(g)<<32 | uint64(n)
				callCtx, cancelCall := context.WithTimeout(ctx, 30*time.Second)
				var out RollArgs
				err := xc.Call(callCtx, "Do", &RollArgs{ID: id}, &out)
				cancelCall()
				if err == nil && out.ID != id {
					err = fmt.Errorf("reply for %d, want %d", out.ID, id)
				}
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if len(firstErrs) < 5 {
						firstErrs = append(firstErrs, err.Error())
					}
					errMu.Unlock()
				}
				done.Add(1)
			}
		}()
	}
	// progress waits until k more calls have completed.
	progress := func(k int64) {
		t.Helper()
		want := done.Load() + k
		for done.Load() < want {
			require.NoError(t, ctx.Err(), "the load stalled at %d calls", done.Load())
			time.Sleep(5 * time.Millisecond)
		}
	}
	progress(5000)
	var shutdowns []time.Duration
	for i := range servers {
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		began := time.Now()
		assert.NoError(t, servers[i].Shutdown(sctx), "Shutdown of server %d", i)
		shutdowns = append(shutdowns, time.Since(began).Round(time.Millisecond))
		scancel()
		var r *Roller
		servers[i], r, _ = rollServer(t, led, batch, addrs[i])
		// As a rolling restart does: the next server goes down once this
		// one takes calls again.
		for r.served.Load() < 100 {
			require.NoError(t, ctx.Err(), "the restarted server %d took no calls", i)
			time.Sleep(5 * time.Millisecond)
		}
		progress(5000)
	}
	close(stop)
	wg.Wait()
	res := rollResult{calls: done.Load(), failed: failed.Load(), firstErrs: firstErrs, took: time.Since(start), shutdowns: shutdowns}
	led.mu.Lock()
	for _, n := range led.runs {
		if n > 1 {
			res.ranTwice++
		}
	}
	led.mu.Unlock()
	require.NoError(t, ctx.Err(), "the scenario ran out of time")
	return res
}

// A rolling restart under load: every server of three is shut down
// gracefully and started again at the same address in turn, while 1,000
// goroutines call through one XClient with client.Failover. Plain rpcx and
// rpcxbatch run the same scenario; rpcxbatch must fail no call, and must
// run no call twice (a call runs twice when its reply was lost and
// Failover tried it again). On the old code the batch path ran calls
// whose replies were lost: Shutdown closed the connections under them.
func TestRollingRestart(t *testing.T) {
	const callers = 1000
	results := map[string]rollResult{}
	paths := []string{"plain", "batch"}
	if raceEnabled {
		// rpcx v1.9.4's own XClient races with itself under Failover
		// (removeClient closes a client another goroutine is calling
		// on), which the detector reports: the plain reference runs
		// without it (make test runs this test again without -race).
		// Nothing is asserted of it.
		paths = []string{"batch"}
		t.Log("plain: left out under -race (rpcx's XClient races in removeClient)")
	}
	for _, path := range paths {
		res := rollingRestart(t, path == "batch", callers)
		results[path] = res
		t.Logf("%s: %d calls in %v, %d failed, %d ran twice, Shutdown took %v; first errors: %q",
			path, res.calls, res.took.Round(time.Millisecond), res.failed, res.ranTwice, res.shutdowns, res.firstErrs)
	}
	batch := results["batch"]
	assert.Zero(t, batch.failed, "batched calls failed: %q", batch.firstErrs)
	assert.Zero(t, batch.ranTwice, "batched calls ran twice (a reply was lost)")
}
