package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rpcxbatch/rpcxbatch/lock"
)

// The pair role, the in-process engine's process: both lock nodes of a
// point in one process, reaching each other over inprocNet, each with
// the clients a node process would have. It speaks the node role's
// protocol (node.go) as one node would; its ADDR line names both nodes,
// and its RESULT is both nodes' (the process's CPU time is both nodes').

// inprocAddrs are the pair's nodes' addresses: names, not sockets.
var inprocAddrs = []string{"in-process/0", "in-process/1"}

// runPair is the pair role's main.
func runPair(in io.Reader, out io.Writer, nodeTimeout time.Duration) error {
	inet := newInprocNet()
	tr := &countingTransport{inner: inet}
	var nodeTr lock.Transport = inet
	if os.Getenv(countEnv) != "" {
		nodeTr = tr
	}
	var nodes []*lock.Node
	// The nodes close before the net, so that their last Drops reach
	// each other.
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
		inet.Close()
	}()
	for _, addr := range inprocAddrs {
		n, err := lock.New(lock.Config{Server: inet.server(addr), Addr: addr, Transport: nodeTr, NodeTimeout: nodeTimeout})
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	fmt.Fprintf(out, "ADDR %s\n", strings.Join(inprocAddrs, " "))
	return serveHarness(in, out, nodes, tr)
}

// pairClients are both nodes' clients of an in-process point.
type pairClients []*lockClients

// newPairClients makes on each node the clients sp asks a node for, as
// node sp.NodeID+i of the point, on keys over all the nodes.
func newPairClients(ctx context.Context, nodes []*lock.Node, sp Spec) (pairClients, error) {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	var pc pairClients
	for i, n := range nodes {
		nsp := sp
		nsp.NodeID, nsp.Nodes = sp.NodeID+i, addrs
		lc, err := newLockClients(ctx, n, nsp)
		if err != nil {
			pc.close()
			return nil, err
		}
		pc = append(pc, lc)
	}
	return pc, nil
}

// run runs every node's clients at once and sums what they did.
func (pc pairClients) run(deadline time.Time) *tally {
	tallies := make([]*tally, len(pc))
	var wg sync.WaitGroup
	for i, lc := range pc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tallies[i] = lc.run(deadline)
		}()
	}
	wg.Wait()
	sum := &tally{}
	for _, t := range tallies {
		sum.add(t)
	}
	return sum
}

func (pc pairClients) close() {
	for _, lc := range pc {
		lc.close()
	}
}

// add adds u's counts to t; t's first error stays first.
func (t *tally) add(u *tally) {
	t.locks.Add(u.locks.Load())
	t.txns.Add(u.txns.Load())
	t.retries.Add(u.retries.Load())
	t.restarted.Add(u.restarted.Load())
	t.errs.Add(u.errs.Load())
	if u.bounded.Load() {
		t.bounded.Store(true)
	}
	u.mu.Lock()
	first := u.first
	u.mu.Unlock()
	t.mu.Lock()
	if t.first == nil {
		t.first = first
	}
	t.mu.Unlock()
}
