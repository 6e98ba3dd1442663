// Command locks shows rpcxbatch/lock on loopback with no external service:
// two lock nodes, each an rpcx server with the batch plugin and a
// batchclient to reach the other. It keeps a contended counter correct
// with locks taken on both nodes, lets two holders run into a deadlock
// that is detected and retried, and shows a dead holder's locks freed.
//
//	go run ./example/locks
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"time"

	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/lock"
)

func main() {
	rlog.SetDummyLogger()
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// startNode starts an rpcx server with the batch plugin on a free loopback
// port and a lock node on it.
func startNode() (*lock.Node, func(), error) {
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	go s.Serve("tcp", addr)
	for deadline := time.Now().Add(5 * time.Second); s.Address() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, nil, errors.New("server did not start")
		}
	}
	bc, err := batchclient.New()
	if err != nil {
		return nil, nil, err
	}
	n, err := lock.New(lock.Config{Server: s, Addr: addr, Transport: bc})
	if err != nil {
		return nil, nil, err
	}
	return n, func() { n.Close(); bc.Close(); s.Close() }, nil
}

func run() error {
	a, stopA, err := startNode()
	if err != nil {
		return err
	}
	defer stopA()
	b, stopB, err := startNode()
	if err != nil {
		return err
	}
	defer stopB()
	both := []string{a.Addr(), b.Addr()}
	ctx := context.Background()
	fmt.Printf("node a: %s\nnode b: %s\n\n", a.Addr(), b.Addr())

	// 1. A counter incremented by 20 holders, half on each node, each
	// read-modify-write under an exclusive lock on both nodes.
	const holders = 20
	counter := 0
	var wg sync.WaitGroup
	var retries sync.Mutex
	nretries := 0
	for i := 0; i < holders; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h, err := []*lock.Node{a, b}[i%2].NewHolder(ctx)
			if err != nil {
				log.Print(err)
				return
			}
			defer h.Close()
			for j := 0; j < 10; j++ {
				for {
					err := h.LockOn(ctx, both, lock.Exclusive, "counter")
					if errors.Is(err, lock.ErrDeadlock) {
						// Two requests each granted on one node: retry.
						retries.Lock()
						nretries++
						retries.Unlock()
						continue
					}
					if err != nil {
						log.Print(err)
						return
					}
					break
				}
				v := counter
				time.Sleep(10 * time.Microsecond) // widen the race a lock must close
				counter = v + 1
				h.Release("counter")
			}
		}(i)
	}
	wg.Wait()
	fmt.Printf("1. counter = %d after %d holders x 10 increments under two-node locks (want %d; %d deadlock retries)\n", counter, holders, holders*10, nretries)

	// 2. A deadlock: h1 holds p and wants q, h2 holds q and wants p.
	h1, _ := a.NewHolder(ctx)
	h2, _ := b.NewHolder(ctx)
	defer h1.Close()
	defer h2.Close()
	if err := h1.LockOn(ctx, both, lock.Exclusive, "p"); err != nil {
		return err
	}
	if err := h2.LockOn(ctx, both, lock.Exclusive, "q"); err != nil {
		return err
	}
	type event struct {
		line string
		last bool
	}
	events := make(chan event, 8)
	try := func(name string, h *lock.Holder, key string) {
		for attempt := 1; attempt <= 5; attempt++ {
			err := h.LockOn(ctx, both, lock.Exclusive, key)
			if errors.Is(err, lock.ErrDeadlock) {
				// The younger holder loses; it keeps what it holds, so
				// it releases everything before it tries again.
				events <- event{fmt.Sprintf("   %s: attempt %d: %v -> release all, retry", name, attempt, err), false}
				h.ReleaseAll()
				continue
			}
			if err != nil {
				events <- event{fmt.Sprintf("   %s: %v", name, err), true}
				return
			}
			events <- event{fmt.Sprintf("   %s: got %s on both nodes (attempt %d)", name, key, attempt), true}
			h.ReleaseAll()
			return
		}
		events <- event{fmt.Sprintf("   %s: gave up", name), true}
	}
	go try("h1 (older)", h1, "q")
	go try("h2 (younger)", h2, "p")
	fmt.Println("2. deadlock between two holders on two nodes:")
	for done := 0; done < 2; {
		e := <-events
		fmt.Println(e.line)
		if e.last {
			done++
		}
	}

	// 3. A holder that dies (its context ends) while holding: its locks
	// are freed on both nodes and a waiter gets them.
	hctx, kill := context.WithCancel(ctx)
	defer kill()
	dead, _ := a.NewHolder(hctx)
	if err := dead.LockOn(ctx, both, lock.Exclusive, "job"); err != nil {
		return err
	}
	waiter, _ := b.NewHolder(ctx)
	defer waiter.Close()
	start := time.Now()
	go func() { time.Sleep(100 * time.Millisecond); kill() }()
	if err := waiter.LockOn(ctx, both, lock.Exclusive, "job"); err != nil {
		return err
	}
	fmt.Printf("3. a holder's context ended 100 ms in; its waiter got the lock on both nodes after %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}
