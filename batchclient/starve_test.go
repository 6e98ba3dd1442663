//go:build linux

package batchclient_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// starveSelf stops this whole process (every thread: the lanes' writers
// and readers get no CPU, as under extreme local overload) for d, and
// returns after it was continued. A shell continues it, several times in
// case the first signal comes too early.
func starveSelf(t *testing.T, d time.Duration) {
	t.Helper()
	pid := os.Getpid()
	script := fmt.Sprintf("sleep %.3f; for i in 1 2 3 4 5; do kill -CONT %d; sleep 0.5; done", d.Seconds(), pid)
	cmd := exec.Command("sh", "-c", script)
	require.NoError(t, cmd.Start())
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	// Continued: the shell's last signals land on a running process.
	require.NoError(t, cmd.Wait())
}

// A client starved of CPU for longer than HeartbeatTimeout does not judge
// its healthy server frozen: nothing it sent went unanswered for
// HeartbeatTimeout of its own running time.
func TestStarvedClientKeepsHealthyPeer(t *testing.T) {
	srv := childproc.Start(t, "127.0.0.1:0")
	c := newClient(t, batchclient.WithHeartbeat(200*time.Millisecond, time.Second))
	addr := srv.Addr()
	waitConnected(t, c, addr)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	inc := c.Info(addr).Incarnation

	// Calls keep going through the starvation.
	var (
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		errMu  sync.Mutex
		errs   []error
		nCalls atomic.Int64
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var r testsvc.Reply
				err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: w, B: i}, &r)
				cancel()
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
				nCalls.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		starveSelf(t, 2500*time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	reconnects := c.Metrics().Get("rpcxbatch.client.reconnects").(interface{ Count() int64 }).Count()
	t.Logf("%d calls, %d failed, %d reconnects", nCalls.Load(), len(errs), reconnects)
	require.Empty(t, errs, "calls failed after the client was starved")
	require.Zero(t, reconnects, "the lanes to a healthy server were torn down")
	require.Equal(t, inc, c.Info(addr).Incarnation)
}
