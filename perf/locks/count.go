package main

import (
	"context"
	"sync/atomic"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/lock"
)

// countEnv, when set, makes every node count the calls it makes to the
// other node, by method (NodeResult.Messages): the messages a lock costs.
const countEnv = "RPCXBATCH_LOCKS_COUNT"

// countingTransport counts the calls a lock node makes to the other node,
// by method: the messages a lock costs. It passes everything on,
// asynchronous calls (Go) included, so the node sends its one-way
// messages the same way as over the transport itself.
type countingTransport struct {
	inner interface {
		lock.Transport
		Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call
		Close() error
	}
	counts [len(countedMethods) + 1]atomic.Int64
}

// countedMethods are the lock service's methods; anything else is
// counted as "other".
var countedMethods = [...]string{"Acquire", "Release", "Abort", "Drop", "Answer", "Status", "Ping", "Probe", "Verdict"}

func (t *countingTransport) count(method string) {
	for i, m := range countedMethods {
		if m == method {
			t.counts[i].Add(1)
			return
		}
	}
	t.counts[len(countedMethods)].Add(1)
}

// snapshot returns the counts so far by method.
func (t *countingTransport) snapshot() map[string]int64 {
	out := make(map[string]int64, len(t.counts))
	for i := range t.counts {
		name := "other"
		if i < len(countedMethods) {
			name = countedMethods[i]
		}
		out[name] = t.counts[i].Load()
	}
	return out
}

func (t *countingTransport) Call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any) error {
	t.count(serviceMethod)
	return t.inner.Call(ctx, addr, servicePath, serviceMethod, args, reply)
}

func (t *countingTransport) Cast(ctx context.Context, addr, servicePath, serviceMethod string, args any) error {
	t.count(serviceMethod)
	return t.inner.Cast(ctx, addr, servicePath, serviceMethod, args)
}

func (t *countingTransport) Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	t.count(serviceMethod)
	return t.inner.Go(ctx, addr, servicePath, serviceMethod, args, reply, done)
}

func (t *countingTransport) Close() error { return t.inner.Close() }
