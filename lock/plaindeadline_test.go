//go:build linux

package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/synstall"
)

// A call over PlainTransport to a frozen node returns by the caller's
// deadline, even while the dial hangs, and a dial that hangs does not hold
// up calls to other nodes.
func TestPlainTransportHonoursDeadlineOfStuckDial(t *testing.T) {
	live, killLive, err := startNodeOver("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(killLive)
	stuck := synstall.Addr(t)
	opt := client.DefaultOption
	opt.ConnectTimeout = 2 * time.Second
	p := NewPlainTransport(opt)
	defer p.Close()

	stuckDone := make(chan time.Duration, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := p.Call(ctx, stuck, ServicePath, "Ping", &PingArgs{}, &PingReply{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call to the stuck node: %v, want its deadline", err)
		}
		stuckDone <- time.Since(start)
	}()
	// Meanwhile a call to a live node goes through at once.
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	var rep PingReply
	if err := p.Call(ctx, live.Addr(), ServicePath, "Ping", &PingArgs{}, &rep); err != nil {
		t.Fatalf("call to a live node while a dial hangs: %v", err)
	}
	liveTook := time.Since(start)
	var took time.Duration
	select {
	case took = <-stuckDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the call to the stuck node did not return in 10 s")
	}
	t.Logf("stuck call returned after %v (deadline 300ms, dial timeout 2s); live call took %v", took, liveTook)
	if took > 1500*time.Millisecond {
		t.Errorf("the call to the stuck node returned after %v, its deadline was 300ms", took)
	}
	if liveTook > 1500*time.Millisecond {
		t.Errorf("a call to a live node took %v while a dial to another hung", liveTook)
	}
}
