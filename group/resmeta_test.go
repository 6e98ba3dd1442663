package group_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Tagger sets response metadata: "tag-<name>" (one key per node) and
// "who" (the same key on every node, so that the last node merged
// shows).
type Tagger struct {
	name  string
	delay atomic.Int64 // nanoseconds Tag waits first
	done  atomic.Int64 // Tag calls that returned
}

// Tag sets the response metadata and answers the node's name, after the
// node's delay; A < 0 rejects (after setting the metadata).
func (tg *Tagger) Tag(ctx context.Context, a *testsvc.Args, r *string) error {
	defer tg.done.Add(1)
	if d := time.Duration(tg.delay.Load()); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	md := ctx.Value(share.ResMetaDataKey).(map[string]string)
	md["tag-"+tg.name] = "1"
	md["who"] = tg.name
	if a.A < 0 {
		return errors.New("tagger rejected")
	}
	*r = tg.name
	return nil
}

// startTagger serves a Tagger on loopback (batch plugin on when batch is
// set); its name is its address.
func startTagger(t *testing.T, batch bool) (string, *Tagger) {
	t.Helper()
	s := server.NewServer()
	if batch {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	tg := new(Tagger)
	require.NoError(t, s.RegisterName("Tag", tg, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	tg.name = addr
	return addr, tg
}

// resCtx returns an rpcx share.Context holding a response-metadata map,
// as an rpcx caller makes one, and the map.
func resCtx(t *testing.T) (*share.Context, map[string]string) {
	res := map[string]string{}
	ctx := share.NewContext(ctxT(t, 10*time.Second))
	ctx.SetValue(share.ResMetaDataKey, res)
	return ctx, res
}

// readRes copies res under the context's lock, as a caller's goroutine
// that shares the context does.
func readRes(ctx *share.Context, res map[string]string) map[string]string {
	ctx.Lock()
	defer ctx.Unlock()
	return maps.Clone(res)
}

// groupCallers returns a batch client and a PlainCaller.
func groupCallers(t *testing.T) map[string]group.Caller {
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	return map[string]group.Caller{"batch client": newBatchClient(t), "PlainCaller": pc}
}

// A fan-out fills the caller's response-metadata map with every node's
// metadata, as rpcx's Broadcast does, but without a data race: each node
// call gets a map of its own and the group merges them on the caller's
// goroutine, under the caller's share.Context lock. The old code handed
// the caller's map to every node at once (the local node's handler, and
// the transports' Call under a NodeTimeout, wrote it concurrently and
// unlocked: a race), and filled nothing on the paths that use the
// Caller's Go (the PlainCaller's Call filled nothing at all). The lock is
// found also through a context derived from the share.Context (rpcx's
// Call takes it only from the share.Context itself).
func TestFanOutResponseMetadataMerged(t *testing.T) {
	for cname, caller := range groupCallers(t) {
		b1, _ := startTagger(t, true)
		b2, _ := startTagger(t, true)
		p, _ := startTagger(t, false)
		l, ltg := missingAddr(t), new(Tagger)
		ltg.name = l
		g, err := group.New(caller, group.WithNodes(b1, b2, p, l), group.WithLocal(l, map[string]any{"Tag": ltg}))
		require.NoError(t, err)
		t.Cleanup(func() { g.Close() })
		nodes := []string{b1, b2, p, l}
		want := map[string]string{}
		for _, n := range nodes {
			want["tag-"+n] = "1"
		}

		for _, opts := range [][]group.CallOption{{group.NodeTimeout(5 * time.Second)}, nil} {
			name := fmt.Sprintf("%s/NodeTimeout=%v", cname, opts != nil)
			for i := 0; i < 6; i++ {
				sc, res := resCtx(t)
				var ctx context.Context = sc
				if i%2 == 1 {
					// A context derived from the share.Context: its lock
					// still guards the map.
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(sc, 10*time.Second)
					defer cancel()
				}
				// The caller's own goroutine reads the map under the
				// context's lock while the operation runs.
				stop, readerDone := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(readerDone)
					for {
						select {
						case <-stop:
							return
						default:
							_ = readRes(sc, res)
							runtime.Gosched()
						}
					}
				}()
				rs, err := group.CallAll[string](ctx, g, "Tag", "Tag", args, opts...)
				close(stop)
				<-readerDone
				require.NoError(t, err, name)
				require.Len(t, rs, 4, name)
				got := maps.Clone(res)
				require.Contains(t, nodes, got["who"], name)
				require.Contains(t, nodes, got[share.ServerAddress], name)
				require.Equal(t, got["who"], got[share.ServerAddress], "%s: the last node merged names both", name)
				delete(got, "who")
				delete(got, share.ServerAddress)
				require.Equal(t, want, got, name)

				sc, res = resCtx(t)
				oks, errs := group.CallAllWait[string](sc, g, "Tag", "Tag", args, opts...)
				require.Empty(t, errs, name)
				require.Len(t, oks, 4, name)
				require.Equal(t, oks[len(oks)-1].Node, res[share.ServerAddress], "%s: CallAllWait merges in arrival order", name)
				for _, n := range nodes {
					require.Equal(t, "1", res["tag-"+n], name)
				}
			}
		}
	}
}

// After CallAny the caller's map holds the winner's metadata merged last
// (share.ServerAddress and "who" name the node whose reply was returned),
// and a node that answers after the operation returned writes nothing:
// the caller may read its map as soon as the call returns. rpcx's Fork
// lets the losers write the map after it returned. The old code filled
// the map from the losers after the return (NodeTimeout), or not at all.
func TestCallAnyResponseMetadataIsTheWinners(t *testing.T) {
	for cname, caller := range groupCallers(t) {
		fast, _ := startTagger(t, true)
		slow, slowTg := startTagger(t, false)
		rej, _ := startTagger(t, true)
		slowTg.delay.Store(int64(300 * time.Millisecond))
		g, err := group.New(caller, group.WithNodes(fast, slow))
		require.NoError(t, err)
		t.Cleanup(func() { g.Close() })

		for _, opts := range [][]group.CallOption{{group.NodeTimeout(5 * time.Second)}, nil} {
			name := fmt.Sprintf("%s/NodeTimeout=%v", cname, opts != nil)
			// The slow node answers 300 ms after the fast one has won.
			before := slowTg.done.Load()
			ctx, res := resCtx(t)
			r, err := group.CallAny[string](ctx, g, "Tag", "Tag", args, opts...)
			require.NoError(t, err, name)
			require.Equal(t, fast, r.Node, name)
			got := maps.Clone(res) // unlocked: the operation is done with the map
			require.Equal(t, map[string]string{"tag-" + fast: "1", "who": fast, share.ServerAddress: fast}, got, name)
			eventually(t, func() bool { return slowTg.done.Load() == before+1 }, "the slow node answered")
			time.Sleep(200 * time.Millisecond) // a late writer would have written by now
			require.Equal(t, got, maps.Clone(res), "%s: the map changed after CallAny returned", name)

			// A rejection's metadata (the error text under rpcx's key
			// included) is merged like a reply's, as rpcx's Call does.
			ctx, res = resCtx(t)
			_, err = group.CallAny[string](ctx, g, "Tag", "Tag", &testsvc.Args{A: -1}, append(opts, group.On(rej))...)
			require.Error(t, err, name)
			require.Equal(t, rej, res[share.ServerAddress], "%s: a rejection's metadata is merged too, as rpcx does", name)
			require.Equal(t, "tagger rejected", res[protocol.ServiceError], name)
		}
	}
}

// Over one node, a group's fan-outs leave the caller's map as rpcx's own
// XClient.Broadcast and Fork leave it (with several nodes rpcx writes the
// map from several goroutines at once, which the race detector reports,
// so only one node is compared), over the batch path and plain rpcx.
func TestFanOutResponseMetadataAsRPCX(t *testing.T) {
	for _, batch := range []bool{true, false} {
		addr, _ := startTagger(t, batch)
		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		xc := client.NewXClient("Tag", client.Failtry, client.RandomSelect, d, client.DefaultOption)
		t.Cleanup(func() { xc.Close() })

		rpcxMap := func(fork bool) map[string]string {
			ctx, res := resCtx(t)
			var r string
			if fork {
				require.NoError(t, xc.Fork(ctx, "Tag", args, &r))
			} else {
				require.NoError(t, xc.Broadcast(ctx, "Tag", args, &r))
			}
			return res
		}
		wantAll, wantAny := rpcxMap(false), rpcxMap(true)
		require.Equal(t, addr, wantAll[share.ServerAddress])

		for cname, caller := range groupCallers(t) {
			g, err := group.New(caller, group.WithNodes(addr))
			require.NoError(t, err)
			t.Cleanup(func() { g.Close() })
			ctx, res := resCtx(t)
			_, err = group.CallAll[string](ctx, g, "Tag", "Tag", args)
			require.NoError(t, err)
			require.Equal(t, wantAll, res, "CallAll over %s, batch server %v", cname, batch)
			ctx, res = resCtx(t)
			_, err = group.CallAny[string](ctx, g, "Tag", "Tag", args)
			require.NoError(t, err)
			require.Equal(t, wantAny, res, "CallAny over %s, batch server %v", cname, batch)
			ctx, res = resCtx(t)
			_, err = group.CallOne[string](ctx, g, "Tag", "Tag", args)
			require.NoError(t, err)
			require.Equal(t, wantAny, res, "CallOne over %s, batch server %v", cname, batch)
		}
	}
}

// The local node's handler gets a response-metadata map of its own, as an
// rpcx server gives every handler: it may write it whether or not the
// caller asked for metadata (the old code gave it the caller's map, or
// none: a handler writing it panicked), and what it writes reaches the
// caller's map with share.ServerAddress set to the local address.
func TestLocalNodeResponseMetadata(t *testing.T) {
	l, ltg := missingAddr(t), new(Tagger)
	ltg.name = l
	g := newGroup(t, group.WithNodes(l), group.WithLocal(l, map[string]any{"Tag": ltg}))

	r, err := group.CallOne[string](ctxT(t, 5*time.Second), g, "Tag", "Tag", args)
	require.NoError(t, err, "no map in the caller's context")
	require.Equal(t, l, r.Value)
	_, err = group.CallAll[string](ctxT(t, 5*time.Second), g, "Tag", "Tag", args)
	require.NoError(t, err, "no map in the caller's context")

	ctx, res := resCtx(t)
	_, err = group.CallAll[string](ctx, g, "Tag", "Tag", args)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"tag-" + l: "1", "who": l, share.ServerAddress: l}, res)
}
