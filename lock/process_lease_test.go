package lock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitStopped waits until the kernel shows the child stopped (SIGSTOP is
// delivered asynchronously).
func waitStopped(t *testing.T, c *lockChild) {
	t.Helper()
	stat := fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)
	eventually(t, "child stopped", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'T'
	})
}

// A holder of this process holds a lock on a node process that freezes
// (SIGSTOP): Lost fires within the lease (NodeTimeout - LeaseMargin from
// the last Ping the frozen node answered), before the frozen node could
// declare this one lost, and the holder's requests fail with ErrLockLost.
func TestProcessSIGSTOPPeerHolderLost(t *testing.T) {
	b := serveNode(t)
	c := startLockChild(t)
	h := newHolder(t, b)
	if err := h.LockOn(context.Background(), []string{c.addr}, Exclusive, "k"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(b.cfg.NodeTimeout / 2) // a few renewals
	c.signal(t, syscall.SIGSTOP)
	waitStopped(t, c)
	stopped := time.Now()
	lease := b.cfg.NodeTimeout - b.cfg.LeaseMargin
	select {
	case <-h.Lost():
	case <-time.After(2 * b.cfg.NodeTimeout):
		t.Fatalf("holder not told in %v of its node's freeze", 2*b.cfg.NodeTimeout)
	}
	took := time.Since(stopped)
	t.Logf("holder told %v after the peer froze (lease %v, NodeTimeout %v)", took, lease, b.cfg.NodeTimeout)
	if took >= b.cfg.NodeTimeout {
		t.Errorf("told %v after the freeze: the frozen node could have dropped the lock at NodeTimeout %v", took, b.cfg.NodeTimeout)
	}
	if err := h.LostCause(); !errors.Is(err, ErrLockLost) {
		t.Errorf("LostCause %v, want ErrLockLost", err)
	}
	if err := h.LockOn(context.Background(), []string{c.addr}, Exclusive, "k2"); !errors.Is(err, ErrLockLost) {
		t.Errorf("LockOn after Lost: %v, want ErrLockLost", err)
	}
	c.signal(t, syscall.SIGCONT)
	// Once thawed, the holder's release frees the key there.
	h.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.do(t, "free k") != "FREE" {
		if time.Now().After(deadline) {
			t.Fatal("k still held on the thawed node after the holder closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
