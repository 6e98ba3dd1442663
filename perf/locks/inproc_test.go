package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/lock"
)

// inprocPair starts two lock nodes over one inprocNet, counted, closed at
// the end of the test (the nodes first).
func inprocPair(t *testing.T) (*inprocNet, *countingTransport, []*lock.Node) {
	t.Helper()
	inet := newInprocNet()
	tr := &countingTransport{inner: inet}
	var nodes []*lock.Node
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
		inet.Close()
	})
	for _, addr := range inprocAddrs {
		n, err := lock.New(lock.Config{Server: inet.server(addr), Addr: addr, Transport: tr, NodeTimeout: 2 * time.Second})
		require.NoError(t, err)
		nodes = append(nodes, n)
	}
	return inet, tr, nodes
}

// Holders of both nodes take two-node exclusive locks on a few keys, so
// that most requests queue on a node (Acquire answered codeQueued, the
// verdict by Answer) and releases travel as one-way messages (Go): never
// two holders inside at once, and every lock taken. Run with -race, it
// also shows that a node's handlers and its holders share nothing
// unguarded over the in-process transport.
func TestInprocPairMutualExclusion(t *testing.T) {
	_, tr, nodes := inprocPair(t)
	addrs := []string{nodes[0].Addr(), nodes[1].Addr()}
	const perNode, rounds, keys = 8, 40, 3
	var inside [keys]atomic.Int32
	var taken, overlap, retries atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*perNode)
	for _, n := range nodes {
		for c := range perNode {
			h, err := n.NewHolder(ctx)
			require.NoError(t, err)
			defer h.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					k := (c + i) % keys
					key := fmt.Sprintf("k%d", k)
					err := h.LockOn(ctx, addrs, lock.Exclusive, key)
					for errors.Is(err, lock.ErrDeadlock) {
						// As design 1 does: a release still lingering on
						// its way makes a cycle for a moment.
						retries.Add(1)
						err = h.LockOn(ctx, addrs, lock.Exclusive, key)
					}
					if err != nil {
						errs <- err
						return
					}
					if inside[k].Add(1) != 1 {
						overlap.Add(1)
					}
					time.Sleep(50 * time.Microsecond)
					inside[k].Add(-1)
					h.Release(key)
					taken.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Zero(t, overlap.Load(), "two holders inside one key's lock at once")
	assert.Equal(t, int64(2*perNode*rounds), taken.Load())
	t.Logf("%d deadlock retries", retries.Load())
	sent := tr.snapshot()
	assert.Positive(t, sent["Answer"], "no request waited on the other node: the test missed the queued path (%v)", sent)
	assert.Positive(t, sent["Release"], "no release went as a one-way message (%v)", sent)
}

// The handler gets its own arguments: Release with All writes the keys
// it gives back into its args (and a queued Acquire keeps its args past
// the reply, while the caller reuses its own once the reply came). This
// shows the struct is the handler's; TestInprocCopiesEveryReference, that
// the slices in it are.
func TestInprocHandlerCopiesArgs(t *testing.T) {
	inet, _, nodes := inprocPair(t)
	h, err := nodes[0].NewHolder(context.Background())
	require.NoError(t, err)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.LockOn(ctx, []string{nodes[1].Addr()}, lock.Exclusive, "a", "b"))

	args := &lock.ReleaseArgs{Owner: h.ID(), Seq: 1, All: true}
	require.NoError(t, inet.Call(ctx, nodes[1].Addr(), lock.ServicePath, "Release", args, &lock.Ack{}))
	assert.Nil(t, args.Keys, "the handler wrote into the caller's ReleaseArgs")
}

// Every reference the lock service's arguments hold is one dispatch
// copies: a slice, map or pointer added to them later would be shared by
// caller and handler over the in-process transport, and this test names
// it.
func TestInprocCopiesEveryReference(t *testing.T) {
	copied := map[string]bool{"AcquireArgs.Keys": true, "AcquireArgs.Released": true, "ReleaseArgs.Keys": true, "ProbeArgs.Path": true, "PingArgs.Check": true}
	args := []any{lock.AcquireArgs{}, lock.ReleaseArgs{}, lock.AbortArgs{}, lock.DropArgs{}, lock.AnswerArgs{},
		lock.StatusArgs{}, lock.PingArgs{}, lock.ProbeArgs{}, lock.VerdictArgs{}}
	var refs []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := prefix + "." + f.Name
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(name, f.Type)
			case reflect.Slice:
				refs = append(refs, name)
				if e := f.Type.Elem(); e.Kind() == reflect.Struct {
					walk(name+"[]", e) // copied by value: must hold no reference
				} else if e.Kind() != reflect.String && e.Kind() > reflect.Complex128 {
					refs = append(refs, name+"[]")
				}
			case reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
				refs = append(refs, name)
			}
		}
	}
	for _, a := range args {
		walk(reflect.TypeOf(a).Name(), reflect.TypeOf(a))
	}
	for _, r := range refs {
		assert.True(t, copied[r], "%s is a reference dispatch does not copy: clone it there", r)
	}
	assert.Len(t, refs, len(copied), "references found: %v", refs)
}

func TestInprocErrors(t *testing.T) {
	inet, _, nodes := inprocPair(t)
	ctx := context.Background()
	at := nodes[1].Addr()
	var rep lock.PingReply
	require.NoError(t, inet.Call(ctx, at, lock.ServicePath, "Ping", &lock.PingArgs{}, &rep))
	assert.Equal(t, nodes[1].Incarnation(), rep.Incarnation)

	assert.ErrorIs(t, inet.Call(ctx, "nowhere", lock.ServicePath, "Ping", &lock.PingArgs{}, &rep), errInprocNoNode)
	assert.ErrorIs(t, inet.Call(ctx, at, lock.ServicePath, "Nope", &lock.PingArgs{}, &rep), errInprocMethod)
	assert.ErrorIs(t, inet.Call(ctx, at, "Other", "Ping", &lock.PingArgs{}, &rep), errInprocMethod)
	assert.ErrorIs(t, inet.Call(ctx, at, lock.ServicePath, "Ping", &lock.StatusArgs{}, &rep), errInprocType)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, inet.Call(ended, at, lock.ServicePath, "Ping", &lock.PingArgs{}, &rep), context.Canceled)

	done := make(chan *client.Call, 1)
	c := inet.Go(ctx, "nowhere", lock.ServicePath, "Ping", &lock.PingArgs{}, &rep, done)
	select {
	case got := <-done:
		assert.Same(t, c, got)
		assert.ErrorIs(t, got.Error, errInprocNoNode)
	default:
		t.Fatal("Go returned before its call was on done")
	}

	require.NoError(t, inet.Close())
	err := inet.Call(ctx, at, lock.ServicePath, "Ping", &lock.PingArgs{}, &rep)
	assert.True(t, errors.Is(err, errInprocClosed), "%v", err)
}
