package group_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// benchGoroutines is the number of concurrent callers.
const benchGoroutines = 1000

// BenchmarkCallAll runs CallAll over 3 loopback servers (each with the
// batch plugin) from 1,000 goroutines, over the batch path (one
// batchclient.Client) and the plain path (a PlainCaller: one rpcx client
// per address), side by side. One op is one CallAll, i.e. 3 calls; the
// calls/s metric counts group calls.
func BenchmarkCallAll(b *testing.B) {
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i], _ = startNode(b, modeOK, true)
	}
	b.Run("batch", func(b *testing.B) {
		benchCallAll(b, newBatchClient(b), addrs)
	})
	b.Run("plain", func(b *testing.B) {
		pc := group.NewPlainCaller(client.DefaultOption)
		b.Cleanup(func() { pc.Close() })
		benchCallAll(b, pc, addrs)
	})
}

func benchCallAll(b *testing.B, c group.Caller, addrs []string) {
	g, err := group.New(c, group.WithNodes(addrs...))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := &testsvc.Args{A: 6, B: 7}
	if _, err := group.CallAll[testsvc.Reply](ctx, g, "Arith", "Mul", a); err != nil {
		b.Fatal(err) // warm up the connections
	}
	var next atomic.Int64
	var failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < benchGoroutines; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				rs, err := group.CallAll[testsvc.Reply](ctx, g, "Arith", "Mul", a)
				if err != nil || len(rs) != 3 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d group calls failed", n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "groupcalls/s")
	b.ReportMetric(float64(3*b.N)/elapsed.Seconds(), "calls/s")
}
