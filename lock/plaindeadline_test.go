//go:build linux

package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
)

// stuckAddr returns the loopback address of a node that is frozen with a
// full accept queue (a SIGSTOPped process that other clients connected
// to): its kernel drops further SYNs, so a dial there hangs until the
// dialer's own timeout.
func stuckAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the accept queue; nobody accepts.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
		if i == 16 {
			t.Fatalf("%s accepted 16 connections with a backlog of 0: cannot make a stuck node", addr)
		}
	}
	return addr
}

// A call over PlainTransport to a frozen node returns by the caller's
// deadline, even while the dial hangs, and a dial that hangs does not hold
// up calls to other nodes.
func TestPlainTransportHonoursDeadlineOfStuckDial(t *testing.T) {
	live, killLive, err := startNodeOver("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(killLive)
	stuck := stuckAddr(t)
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
