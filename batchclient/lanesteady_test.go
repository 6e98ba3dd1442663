package batchclient_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// slowRun's Run takes 20 ms.
type slowRun struct{}

// Run answers after 20 ms.
func (slowRun) Run(_ context.Context, a *RunArgs, rep *RunReply) error {
	time.Sleep(20 * time.Millisecond)
	rep.ID = a.ID
	return nil
}

// A steady load of slow calls a bit above one lane's window grows the pool
// on the window stall and keeps it: its writers are then nearly idle (the
// calls are slow, not the lane), but its lanes' windows would not fit in
// one lane fewer. (Judged by the writers alone, the pool retired a lane,
// stalled, grew, 11-15 times in 3 s.)
func TestSteadySlowLoadKeepsItsLanes(t *testing.T) {
	s := server.NewServer()
	_, err := batchserver.New(s, batchserver.WithPoolSize(4), batchserver.WithWindow(100))
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Run", slowRun{}, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	reg := metrics.NewRegistry()
	c := newClient(t, batchclient.WithLaneRange(1, 4), batchclient.WithLaneIdle(100*time.Millisecond),
		batchclient.WithMetrics(reg))
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000 && time.Now().Before(end); i++ {
				var rep RunReply
				if err := c.Call(ctx, addr, "Run", "Run", &RunArgs{ID: 0}, &rep); err != nil {
					t.Errorf("call: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	added := reg.Get("rpcxbatch.client.lanes.added").(metrics.Counter).Count()
	retired := reg.Get("rpcxbatch.client.lanes.retired").(metrics.Counter).Count()
	t.Logf("steady load for 3 s: lanes added %d, retired %d", added, retired)
	require.LessOrEqual(t, retired, int64(1), "a steady load should not make the pool swing")
}
