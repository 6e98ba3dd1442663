package group_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Rec records the arguments of every call it runs.
type Rec struct {
	mu  sync.Mutex
	got []testsvc.Args
}

// Take records *a and answers a.A.
func (r *Rec) Take(_ context.Context, a *testsvc.Args, out *Answer) error {
	r.mu.Lock()
	r.got = append(r.got, *a)
	r.mu.Unlock()
	out.N = a.A
	return nil
}

// received returns a copy of what r has recorded.
func (r *Rec) received() []testsvc.Args {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]testsvc.Args(nil), r.got...)
}

// startRec serves a Rec on loopback (batch plugin on when batch is set).
func startRec(t *testing.T, batch bool) (string, *Rec) {
	t.Helper()
	s := server.NewServer()
	if batch {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	r := new(Rec)
	require.NoError(t, s.RegisterName("Rec", r, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	return addr, r
}

// Every group operation is done with the caller's arguments when it
// returns: the caller overwrites them right away, and every node (batch,
// plain, local; over a batch client and over a PlainCaller) must receive
// the value they had at call time. Under the race detector the old code
// also fails with a data race (casts and fan-outs encoded the caller's
// value on goroutines of their own after the operation returned).
func TestGroupOpsOwnTheirArguments(t *testing.T) {
	const rounds = 10
	callers := map[string]group.Caller{"batch client": newBatchClient(t)}
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	callers["PlainCaller"] = pc

	for cname, caller := range callers {
		bAddr, bRec := startRec(t, true)
		pAddr, pRec := startRec(t, false)
		lAddr, lRec := missingAddr(t), new(Rec)
		g, err := group.New(caller, group.WithLocal(lAddr, map[string]any{"Rec": lRec}))
		require.NoError(t, err)
		t.Cleanup(func() { g.Close() })
		recs := []*Rec{bRec, pRec, lRec}

		ops := []struct {
			name string
			want [3]int // calls each of batch, plain, local must record per round
			run  func(ctx context.Context, a *testsvc.Args) error
		}{
			{"CastAll", [3]int{1, 1, 1}, func(ctx context.Context, a *testsvc.Args) error {
				return group.CastAll(ctx, g, "Rec", "Take", a, group.On(bAddr, pAddr, lAddr))
			}},
			{"CastOne batch", [3]int{1, 0, 0}, func(ctx context.Context, a *testsvc.Args) error {
				return group.CastOne(ctx, g, "Rec", "Take", a, group.On(bAddr))
			}},
			{"CastOne plain", [3]int{0, 1, 0}, func(ctx context.Context, a *testsvc.Args) error {
				return group.CastOne(ctx, g, "Rec", "Take", a, group.On(pAddr))
			}},
			{"CastOne local", [3]int{0, 0, 1}, func(ctx context.Context, a *testsvc.Args) error {
				return group.CastOne(ctx, g, "Rec", "Take", a, group.On(lAddr))
			}},
			{"CallAny local then casts", [3]int{1, 1, 1}, func(ctx context.Context, a *testsvc.Args) error {
				_, err := group.CallAny[Answer](ctx, g, "Rec", "Take", a, group.On(lAddr, bAddr, pAddr))
				return err
			}},
			{"CallAny remote", [3]int{1, 1, 0}, func(ctx context.Context, a *testsvc.Args) error {
				_, err := group.CallAny[Answer](ctx, g, "Rec", "Take", a, group.On(bAddr, pAddr))
				return err
			}},
			{"CallAll", [3]int{1, 1, 1}, func(ctx context.Context, a *testsvc.Args) error {
				_, err := group.CallAll[Answer](ctx, g, "Rec", "Take", a, group.On(bAddr, pAddr, lAddr))
				return err
			}},
			{"CallAllWait with NodeTimeout", [3]int{1, 1, 1}, func(ctx context.Context, a *testsvc.Args) error {
				_, errs := group.CallAllWait[Answer](ctx, g, "Rec", "Take", a, group.On(bAddr, pAddr, lAddr), group.NodeTimeout(5*time.Second))
				if len(errs) > 0 {
					return errs[0]
				}
				return nil
			}},
			{"CallOne", [3]int{1, 0, 0}, func(ctx context.Context, a *testsvc.Args) error {
				_, err := group.CallOne[Answer](ctx, g, "Rec", "Take", a, group.On(bAddr))
				return err
			}},
		}
		for _, op := range ops {
			t.Run(cname+"/"+op.name, func(t *testing.T) {
				var before [3]int
				for i, r := range recs {
					before[i] = len(r.received())
				}
				for round := 1; round <= rounds; round++ {
					a := &testsvc.Args{A: round, B: 6}
					require.NoError(t, op.run(ctxT(t, 5*time.Second), a))
					// The operation has returned: the arguments are the
					// caller's again.
					a.A, a.B = -1, -1
				}
				eventually(t, func() bool {
					for i, r := range recs {
						if len(r.received()) != before[i]+rounds*op.want[i] {
							return false
						}
					}
					return true
				}, "every node ran every round")
				for i, r := range recs {
					got := r.received()[before[i]:]
					seen := map[int]int{}
					for _, a := range got {
						require.Equal(t, 6, a.B, "node %d received arguments changed after the call returned: %+v", i, a)
						seen[a.A]++
					}
					for round := 1; op.want[i] > 0 && round <= rounds; round++ {
						require.Equal(t, op.want[i], seen[round], "node %d, round %d: %v", i, round, got)
					}
				}
			})
		}
	}
}

// unencodable cannot be encoded by rpcx's codecs (msgpack has no form for
// a channel).
type unencodable struct {
	C chan int
}

// Arguments that cannot be encoded fail every group operation with
// ErrEncode, before any node runs anything; CallAllWait reports it for
// every node.
func TestGroupOpsReportEncodeErrors(t *testing.T) {
	bAddr, bRec := startRec(t, true)
	pAddr, pRec := startRec(t, false)
	lAddr, lRec := missingAddr(t), new(Rec)
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	for cname, caller := range map[string]group.Caller{"batch client": newBatchClient(t), "PlainCaller": pc} {
		t.Run(cname, func(t *testing.T) {
			g, err := group.New(caller, group.WithNodes(bAddr, pAddr, lAddr), group.WithLocal(lAddr, map[string]any{"Rec": lRec}))
			require.NoError(t, err)
			t.Cleanup(func() { g.Close() })
			ctx := ctxT(t, 5*time.Second)
			bad := &unencodable{C: make(chan int)}
			errs := map[string]error{
				"CastAll":            group.CastAll(ctx, g, "Rec", "Take", bad),
				"CastOne batch":      group.CastOne(ctx, g, "Rec", "Take", bad, group.On(bAddr)),
				"CastOne plain":      group.CastOne(ctx, g, "Rec", "Take", bad, group.On(pAddr)),
				"CastOne local":      group.CastOne(ctx, g, "Rec", "Take", bad, group.On(lAddr)),
				"CastOne (by value)": group.CastOne(ctx, g, "Rec", "Take", *bad, group.On(bAddr)),
			}
			_, errs["CallAny"] = group.CallAny[Answer](ctx, g, "Rec", "Take", bad)
			_, errs["CallAll"] = group.CallAll[Answer](ctx, g, "Rec", "Take", bad)
			_, errs["CallOne remote"] = group.CallOne[Answer](ctx, g, "Rec", "Take", bad, group.On(bAddr, pAddr))
			for name, err := range errs {
				require.ErrorIs(t, err, group.ErrEncode, name)
				require.ErrorContains(t, err, "unencodable", name)
			}
			_, nodeErrs := group.CallAllWait[Answer](ctx, g, "Rec", "Take", bad)
			require.ElementsMatch(t, []string{bAddr, pAddr, lAddr}, errNodes(nodeErrs))
			for _, e := range nodeErrs {
				require.ErrorIs(t, e, group.ErrEncode)
			}
			// Good arguments still go through.
			n := len(bRec.received())
			require.NoError(t, group.CastAll(ctx, g, "Rec", "Take", &testsvc.Args{A: 1, B: 6}))
			eventually(t, func() bool {
				return len(bRec.received()) == n+1 && len(pRec.received()) == n+1 && len(lRec.received()) == n+1
			}, "the good cast ran")
		})
	}
	// Nothing of the bad arguments ran anywhere: each node has the two
	// good casts only.
	for _, r := range []*Rec{bRec, pRec, lRec} {
		require.Equal(t, []testsvc.Args{{A: 1, B: 6}, {A: 1, B: 6}}, r.received())
	}
}

// PlainCaller.Cast waits for rpcx to be done with the cast (written, or
// failed), so that it reports a failure to encode and never reads the
// call's error while rpcx's sender writes it (a data race under -race on
// the old code, which also returned nil).
func TestPlainCallerCastReportsAndDoesNotRace(t *testing.T) {
	addr, rec := startRec(t, false)
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	ctx := ctxT(t, 5*time.Second)
	for i := 0; i < 20; i++ {
		err := pc.Cast(ctx, addr, "Rec", "Take", &unencodable{C: make(chan int)})
		require.Error(t, err, "cast %d", i)
		require.ErrorContains(t, err, "unsupported", "cast %d", i)
	}
	for i := 0; i < 20; i++ {
		a := &testsvc.Args{A: i, B: 6}
		require.NoError(t, pc.Cast(ctx, addr, "Rec", "Take", a))
		a.A = -1 // Cast has returned: rpcx has written the cast
	}
	eventually(t, func() bool { return len(rec.received()) == 20 }, "20 casts ran")
	// rpcx sends each call from a goroutine of its own: in any order.
	want := make([]testsvc.Args, 20)
	for i := range want {
		want[i] = testsvc.Args{A: i, B: 6}
	}
	require.ElementsMatch(t, want, rec.received())
}

// Group.Close ends and waits for every goroutine the group started: casts
// still running (a local handler that waits for its context here) and the
// per-node calls a policy left running when it returned early. Afterwards
// no goroutine of package group is left, and operations fail with
// ErrClosed.
func TestCloseJoinsGroupGoroutines(t *testing.T) {
	rej, _ := startNode(t, modeReject, true)
	l := missingAddr(t)
	hang := &Node{name: l, mode: modeHang}
	g, err := group.New(newBatchClient(t), group.WithNodes(l), group.WithLocal(l, map[string]any{"Node": hang}))
	require.NoError(t, err)
	ctx := ctxT(t, 20*time.Second)
	for i := 0; i < 5; i++ {
		require.NoError(t, group.CastAll(ctx, g, "Node", "Do", args))
	}
	// CallAll returns on the remote rejection; the local node's call, in
	// a goroutine of its own (NodeTimeout), runs on.
	_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args, group.On(rej, l), group.NodeTimeout(15*time.Second))
	require.ErrorIs(t, err, group.ErrRejected)
	eventually(t, func() bool { return hang.calls.Load() == 6 }, "every hanging call started")
	_, inGroup, _ := goroutines()
	require.GreaterOrEqual(t, inGroup, 6, "the hanging calls run on goroutines of the group")

	start := time.Now()
	require.NoError(t, g.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close ended the hanging calls")
	require.EqualValues(t, 6, hang.done.Load(), "Close returned after every call it started had ended")
	// Close returns once each goroutine's deferred Done has run, which may
	// be a moment before that goroutine has exited (one was seen at
	// goOwned's closing brace, runnable). A goroutine still in a hanging
	// call would stay for its 15 s NodeTimeout, far past this bound.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, inGroup, dump := goroutines()
		if inGroup == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no goroutine of the group is left once Close returns\n%s", dump)
	}

	require.ErrorIs(t, group.CastAll(ctx, g, "Node", "Do", args), group.ErrClosed)
	require.ErrorIs(t, group.CastOne(ctx, g, "Node", "Do", args), group.ErrClosed)
	_, err = group.CallOne[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrClosed)
	_, errs := group.CallAllWait[Answer](ctx, g, "Node", "Do", args)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], group.ErrClosed)
	require.EqualValues(t, 6, hang.calls.Load(), "nothing ran after Close")
}
