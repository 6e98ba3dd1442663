package batchserver

import (
	"net"
	"sync"
	"testing"

	"github.com/smallnest/rpcx/server"
)

// TestJanitorLooksNeverOverlap: a look that runs longer than janitorEvery
// (a loaded machine) while a park armed the next one overlaps that one;
// the looks share the janitor's snapshot and the connections' quiet marks,
// so they must take turns (the race detector sees it otherwise).
func TestJanitorLooksNeverOverlap(t *testing.T) {
	p, err := New(server.NewServer())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; i < 64; i++ {
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		p.hooks.lanes.Store(c1, &laneMark{})
		p.conn(c1)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				p.janitor.look()
			}
		}()
	}
	wg.Wait()
}
