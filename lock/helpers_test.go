package lock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// localNode makes a node with no server, closed at the end of the test.
func localNode(t testing.TB) *Node {
	t.Helper()
	n, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func newHolder(t testing.TB, n *Node) *Holder {
	t.Helper()
	h, err := n.NewHolder(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lockAsync runs h.Lock in a goroutine and returns its result channel.
func lockAsync(ctx context.Context, h *Holder, mode Mode, keys ...string) chan error {
	ch := make(chan error, 1)
	go func() { ch <- h.Lock(ctx, mode, keys...) }()
	return ch
}

func mustNotReturn(t testing.TB, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early: %v", what, err)
	default:
	}
}

func recv(t testing.TB, ch chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return in 10 s", what)
		return nil
	}
}

// dump describes key's row on n, for failure messages.
func dump(n *Node, key string) string {
	s, h := n.table.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, key)
	if r == nil {
		return "free"
	}
	out := fmt.Sprintf("mode %v ticket %d holders", r.mode, r.ticket)
	for _, o := range r.owners {
		out += fmt.Sprintf(" %v(origin %q closed %v)", o.id, o.origin, o.closed.Load())
	}
	if r.mgr != nil {
		for _, w := range r.mgr.queue {
			out += fmt.Sprintf(" | waiter %v %v t%d", w.o.id, w.mode, w.ticket)
		}
	}
	return out
}

// waitFor polls cond for up to 10 s and reports whether it came true.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}
