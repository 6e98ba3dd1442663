package group_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// master_killed: the caller's context ends while the policy waits; every
// policy returns at once with an error wrapping the context's.
func TestCallerContextEnds(t *testing.T) {
	hang, _ := startNode(t, modeHang, true)
	hang2, _ := startNode(t, modeHang, true)
	g := newGroup(t, group.WithNodes(hang, hang2))
	type policy func(ctx context.Context) error
	policies := map[string]policy{
		"CallOne": func(ctx context.Context) error {
			_, err := group.CallOne[Answer](ctx, g, "Node", "Do", args)
			return err
		},
		"CallAny": func(ctx context.Context) error {
			_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
			return err
		},
		"CallAll": func(ctx context.Context) error {
			_, err := group.CallAll[Answer](ctx, g, "Node", "Do", args)
			return err
		},
	}
	for name, call := range policies {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, err.Error(), name)
			require.NotErrorIs(t, err, group.ErrNoneAvailable)
			require.Less(t, time.Since(start), 2*time.Second)
		})
	}
	t.Run("CallAllWait", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		rs, errs := group.CallAllWait[Answer](ctx, g, "Node", "Do", args)
		require.Empty(t, rs)
		require.ElementsMatch(t, []string{hang, hang2}, errNodes(errs))
		for _, e := range errs {
			require.ErrorIs(t, e, group.ErrUnreachable)
			require.ErrorIs(t, e, context.DeadlineExceeded)
		}
	})
}

// master_killed_after_local_rejection: the local node rejects, the remote
// ones hang, the caller's context ends: the call is interrupted.
func TestCallerContextEndsAfterLocalRejection(t *testing.T) {
	hang, _ := startNode(t, modeHang, true)
	l, inproc, _, opt := withLocal(t, modeReject)
	g := newGroup(t, group.WithNodes(l, hang), opt)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualValues(t, 1, inproc.calls.Load())
}

// caller_killed_all, caller_killed_wait, caller_killed_any: a per-node call
// that ends (NodeTimeout) counts as unreachable for its node.
func TestPerNodeCallKilled(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	ok, _ := startNode(t, modeOK, true)
	hang, _ := startNode(t, modeHang, true)
	hang2, _ := startNode(t, modeHang, false)
	g := newGroup(t, group.WithNodes(ok, hang))
	// hang2 is a plain rpcx server reached through a PlainCaller: plain rpcx
	// carries no deadline, so only the client side ends the call there.
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	gp, err := group.New(pc, group.WithNodes(hang, hang2))
	require.NoError(t, err)
	kill := group.NodeTimeout(100 * time.Millisecond)

	t.Run("all", func(t *testing.T) {
		rs, err := group.CallAll[Answer](ctx, g, "Node", "Do", args, kill)
		require.NoError(t, err)
		require.Equal(t, []string{ok}, nodesOf(rs), "by default the killed node is skipped")
		_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args, kill, group.Unreachable(true))
		var ne *group.NodeError
		require.ErrorAs(t, err, &ne)
		require.Equal(t, hang, ne.Node)
		require.ErrorIs(t, err, group.ErrUnreachable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("wait", func(t *testing.T) {
		rs, errs := group.CallAllWait[Answer](ctx, g, "Node", "Do", args, kill)
		require.Equal(t, []string{ok}, nodesOf(rs))
		require.Equal(t, []string{hang}, errNodes(errs))
		require.ErrorIs(t, errs[0], group.ErrUnreachable)
	})
	t.Run("any", func(t *testing.T) {
		r, err := group.CallAny[Answer](ctx, g, "Node", "Do", args, kill)
		require.NoError(t, err)
		require.Equal(t, ok, r.Node, "one killed: the other wins")

		_, err = group.CallAny[Answer](ctx, gp, "Node", "Do", args, kill)
		require.ErrorIs(t, err, group.ErrNoneAvailable, "all killed")
		_, err = group.CallAny[Answer](ctx, gp, "Node", "Do", args, kill, group.Unreachable(true))
		var rej group.Rejections
		require.ErrorAs(t, err, &rej)
		require.ElementsMatch(t, []string{hang, hang2}, errNodes(rej))
		for _, e := range rej {
			require.ErrorIs(t, e, group.ErrUnreachable)
		}
	})
}

// early_return_keeps_callers: after CallAll returns on the first rejection
// and CallAny on the first success, the other nodes' calls are not
// cancelled: they run to their end. The other node answers only once the
// test releases it, after the group call returned: that the group call
// returned while the node's call had not ended shows it did not wait for
// it, however slow the machine (a bound of 250 ms against a node that
// answered after 300 ms measured the machine too).
func TestEarlyReturnKeepsCalls(t *testing.T) {
	slow, ns := startNode(t, modeGated, true)
	rej, _ := startNode(t, modeReject, true)
	ok, _ := startNode(t, modeOK, false)
	g := newGroup(t, group.WithNodes(slow, rej))

	ctx := ctxT(t, 5*time.Second)
	_, err := group.CallAll[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrRejected)
	require.Zero(t, ns.done.Load(), "CallAll waited for the held node's call to end")
	ns.release <- struct{}{}
	eventually(t, func() bool { return ns.oks.Load() == 1 }, "the held node's call ran to its end, not cancelled")

	r, err := group.CallAny[Answer](ctx, g, "Node", "Do", args, group.On(slow, ok))
	require.NoError(t, err)
	require.Equal(t, ok, r.Node)
	require.EqualValues(t, 1, ns.done.Load(), "CallAny waited for the held node's call to end")
	ns.release <- struct{}{}
	eventually(t, func() bool { return ns.oks.Load() == 2 }, "the held node's call ran to its end, not cancelled")
}

// owner_killed: casts (CastAll, and CallAny's casts after a local success)
// are delivered even when the caller cancels its context right after the
// call returns.
func TestCastsOutliveCancelledCaller(t *testing.T) {
	a, na := startNode(t, modeOK, true)
	b, nb := startNode(t, modeOK, false)
	l, _, _, opt := withLocal(t, modeOK)
	g := newGroup(t, group.WithNodes(l, a, b), opt)
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, group.CastAll(ctx, g, "Node", "Do", args, group.On(a, b)))
		cancel()
		ctx, cancel = context.WithCancel(context.Background())
		_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
		cancel()
		require.NoError(t, err)
	}
	eventually(t, func() bool { return na.done.Load() == 10 && nb.done.Load() == 10 }, "every cast delivered")
}

// unrelated_owner_messages: the caller's own context values (rpcx request
// metadata here) reach every node, local and remote, untouched.
func TestCallerContextValuesReachNodes(t *testing.T) {
	ok, _ := startNode(t, modeOK, true)
	p, _ := startNode(t, modeOK, false)
	l := missingAddr(t) // the local node needs no server
	g := newGroup(t, group.WithNodes(ok, p, l), group.WithLocal(l, map[string]any{"Meta": new(metaSvc)}))
	ctx := context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, map[string]string{"owner": "kept"})
	rs, err := group.CallAll[string](ctx, g, "Meta", "Who", args)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	for _, r := range rs {
		require.Equal(t, "kept", r.Value, r.Node)
	}
}

// no_error_reports: group calls with rejections and unreachable nodes log
// nothing through rpcx's logger from the group package's own code (see
// groupLogs: rpcx's own lines, a dial failure say, are not the group's);
// owner_hygiene: and leave no goroutine
// behind once their calls have ended.
func TestNoGoroutineLeftBehind(t *testing.T) {
	ok, _ := startNode(t, modeOK, true)
	p, _ := startNode(t, modeOK, false)
	rej, _ := startNode(t, modeReject, true)
	slow, ns := startNode(t, modeSlow, true)
	hang, _ := startNode(t, modeHang, true)
	pan, _ := startNode(t, modePanic, false)
	m := missingAddr(t)
	l, inproc, _, opt := withLocal(t, modeOK)
	all := []string{ok, p, rej, slow, hang, pan, m, l}
	bc := newBatchClient(t)
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	gb, err := group.New(bc, group.WithNodes(all...), opt)
	require.NoError(t, err)
	gp, err := group.New(pc, group.WithNodes(all...), opt)
	require.NoError(t, err)

	// The hanging node is called over the batch path only: plain rpcx
	// carries no deadline, so its server-side handler would outlive the
	// call (a goroutine of the server, not of the group call).
	run := func(g *group.Group, nodes ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		kill := group.NodeTimeout(100 * time.Millisecond)
		on := group.On(nodes...)
		_, _ = group.CallOne[Answer](ctx, g, "Node", "Do", args, kill, on)
		_, _ = group.CallAny[Answer](ctx, g, "Node", "Do", args, kill, on)
		_, _ = group.CallAny[Answer](ctx, g, "Node", "Do", args, kill, group.On(slow, ok))
		_, _ = group.CallAll[Answer](ctx, g, "Node", "Do", args, kill, on)
		_, _ = group.CallAllWait[Answer](ctx, g, "Node", "Do", args, kill, on)
		_ = group.CastAll(ctx, g, "Node", "Do", args, group.On(ok, p, l))
		_ = group.CastOne(ctx, g, "Node", "Do", args, on)
	}
	noHang := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == hang })
	// Warm up: connections, lanes, the reconnect loop of the missing
	// address; then wait until every handler started so far has ended.
	run(gb, all...)
	run(gp, noHang...)
	eventually(t, func() bool { return ns.calls.Load() == ns.done.Load() && inproc.calls.Load() == inproc.done.Load() }, "warm-up calls ended")
	time.Sleep(300 * time.Millisecond)
	before, _, _ := goroutines()
	logged := groupLogs.count()

	for i := 0; i < 5; i++ {
		run(gb, all...)
		run(gp, noHang...)
	}
	// Early returns leave calls running (the slow node); they end on
	// their own, and so must their goroutines.
	settleGoroutines(t, before)
	require.Empty(t, groupLogs.since(logged), "the group package logged")
}

// metaSvc answers the metadata value "owner" of its call.
type metaSvc struct{}

// Who returns the "owner" metadata of the call's context.
func (m *metaSvc) Who(ctx context.Context, _ *testsvc.Args, r *string) error {
	md, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	*r = md["owner"]
	return nil
}
