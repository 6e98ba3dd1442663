package follow_test

import (
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/follow"
)

// A stale list announced last (out of order) is corrected by the current
// list once announcements pause.
func TestConvergesOnCurrentList(t *testing.T) {
	in := make(chan []*client.KVPair, 4)
	stop := make(chan struct{})
	done := make(chan struct{})
	newest := []*client.KVPair{{Key: "tcp@a"}, {Key: "tcp@b"}}
	var mu sync.Mutex
	var seen []*client.KVPair
	go func() {
		defer close(done)
		follow.Follow(in, func() []*client.KVPair { return newest }, func(p []*client.KVPair) {
			mu.Lock()
			seen = p
			mu.Unlock()
		}, stop)
	}()
	in <- newest
	in <- []*client.KVPair{{Key: "tcp@a"}} // the older list, delivered late
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 2
	}, 5*time.Second, 5*time.Millisecond)
	close(stop)
	<-done
}

// Closing the announcement channel ends Follow.
func TestEndsWhenClosed(t *testing.T) {
	in := make(chan []*client.KVPair)
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow.Follow(in, func() []*client.KVPair { return nil }, func([]*client.KVPair) {}, nil)
	}()
	close(in)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not end")
	}
}
