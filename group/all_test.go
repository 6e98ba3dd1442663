package group_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/group"
)

// all_success: every node answers, each reply tagged with its node; the
// local node runs in-process; batch and plain servers mix in one list.
func TestCallAllSuccess(t *testing.T) {
	for _, withL := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote", true: "with local"}[withL], func(t *testing.T) {
			a, _ := startNode(t, modeOK, true)
			b, _ := startNode(t, modeOK, true)
			p, _ := startNode(t, modeOK, false)
			nodes, opts := []string{a, b, p}, []group.Option(nil)
			var inproc, network *Node
			if withL {
				var l string
				var opt group.Option
				l, inproc, network, opt = withLocal(t, modeOK)
				nodes, opts = append(nodes, l), append(opts, opt)
			}
			g := newGroup(t, append(opts, group.WithNodes(nodes...))...)
			rs, err := group.CallAll[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args)
			require.NoError(t, err)
			require.ElementsMatch(t, nodes, nodesOf(rs))
			for _, r := range rs {
				require.Equal(t, Answer{Node: r.Node, N: 7}, r.Value)
			}
			if withL {
				require.EqualValues(t, 1, inproc.calls.Load())
				require.Zero(t, network.calls.Load())
			}
		})
	}
}

// all_rejection: the first rejection ends the call with that node's error,
// a panic likewise with ErrPanic.
func TestCallAllRejection(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	for _, withL := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote", true: "with local"}[withL], func(t *testing.T) {
			a, _ := startNode(t, modeOK, true)
			r, _ := startNode(t, modeReject, true)
			p, _ := startNode(t, modePanic, false)
			nodes, opts := []string{a, r}, []group.Option(nil)
			if withL {
				l, _, _, opt := withLocal(t, modeOK)
				nodes, opts = append(nodes, l), append(opts, opt)
			}
			g := newGroup(t, append(opts, group.WithNodes(nodes...))...)
			rs, err := group.CallAll[Answer](ctx, g, "Node", "Do", args)
			require.Nil(t, rs)
			var ne *group.NodeError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, r, ne.Node)
			require.ErrorIs(t, err, group.ErrRejected)
			require.NotErrorIs(t, err, group.ErrPanic)

			_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args, group.On(append(nodes[:1:1], p)...))
			require.ErrorAs(t, err, &ne)
			require.Equal(t, p, ne.Node)
			require.ErrorIs(t, err, group.ErrPanic)
		})
	}
	t.Run("local panic", func(t *testing.T) {
		a, _ := startNode(t, modeOK, true)
		l, _, _, opt := withLocal(t, modePanic)
		g := newGroup(t, group.WithNodes(a, l), opt)
		_, err := group.CallAll[Answer](ctx, g, "Node", "Do", args)
		var pe *group.PanicError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "node exploded", pe.Value)
	})
}

// all_unreachable: Missing is skipped, or ends the call with
// Unreachable(true); [Missing] alone is none available.
func TestCallAllUnreachable(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	m := missingAddr(t)
	for _, withL := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote", true: "with local"}[withL], func(t *testing.T) {
			a, _ := startNode(t, modeOK, true)
			nodes, opts := []string{a, m}, []group.Option(nil)
			if withL {
				l, _, _, opt := withLocal(t, modeOK)
				nodes, opts = append(nodes, l), append(opts, opt)
			}
			g := newGroup(t, append(opts, group.WithNodes(nodes...))...)
			rs, err := group.CallAll[Answer](ctx, g, "Node", "Do", args)
			require.NoError(t, err)
			want := []string{a}
			if withL {
				want = append(want, nodes[2])
			}
			require.ElementsMatch(t, want, nodesOf(rs))

			_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args, group.Unreachable(true))
			var ne *group.NodeError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, m, ne.Node)
			require.ErrorIs(t, err, group.ErrUnreachable)
			require.ErrorIs(t, err, batchclient.ErrPeerDown, "the transport's cause is kept")

			_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args, group.On(m))
			require.ErrorIs(t, err, group.ErrNoneAvailable)
		})
	}
}

// all_arrival_order: replies come in arrival order, not list order.
func TestCallAllArrivalOrder(t *testing.T) {
	slow, _ := startNode(t, modeSlow, true)
	fast, _ := startNode(t, modeOK, false)
	g := newGroup(t, group.WithNodes(slow, fast))
	rs, err := group.CallAll[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args)
	require.NoError(t, err)
	require.Equal(t, []string{fast, slow}, nodesOf(rs))

	l, _, _, opt := withLocal(t, modeSlow)
	gl := newGroup(t, group.WithNodes(l, fast), opt)
	rs, err = group.CallAll[Answer](ctxT(t, 5*time.Second), gl, "Node", "Do", args)
	require.NoError(t, err)
	require.Equal(t, []string{fast, l}, nodesOf(rs))
}

// wait_mixed_results: every node is reported: replies, rejections, panics
// and unreachable nodes, each of its kind.
func TestCallAllWaitMixedResults(t *testing.T) {
	ok, _ := startNode(t, modeOK, true)
	pok, _ := startNode(t, modeOK, false)
	rej, _ := startNode(t, modeReject, true)
	pan, _ := startNode(t, modePanic, false)
	m := missingAddr(t)
	l, _, _, opt := withLocal(t, modePanic)
	g := newGroup(t, group.WithNodes(ok, pok, rej, pan, m, l), opt)

	rs, errs := group.CallAllWait[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args)
	require.ElementsMatch(t, []string{ok, pok}, nodesOf(rs))
	require.ElementsMatch(t, []string{rej, pan, m, l}, errNodes(errs))
	for _, e := range errs {
		switch e.Node {
		case rej:
			require.ErrorIs(t, e, group.ErrRejected)
			require.NotErrorIs(t, e, group.ErrPanic)
		case pan, l:
			require.ErrorIs(t, e, group.ErrPanic)
		case m:
			require.ErrorIs(t, e, group.ErrUnreachable)
		}
	}
}

// wait_arrival_order: both lists are in arrival order.
func TestCallAllWaitArrivalOrder(t *testing.T) {
	slowOK, _ := startNode(t, modeSlow, true)
	fastOK, _ := startNode(t, modeOK, true)
	slowRej, _ := startNode(t, modeHang, true)
	fastRej, _ := startNode(t, modeReject, false)
	g := newGroup(t, group.WithNodes(slowRej, slowOK, fastRej, fastOK))
	rs, errs := group.CallAllWait[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args,
		group.NodeTimeout(600*time.Millisecond))
	require.Equal(t, []string{fastOK, slowOK}, nodesOf(rs))
	require.Equal(t, []string{fastRej, slowRej}, errNodes(errs))
	require.ErrorIs(t, errs[1], group.ErrUnreachable, "a per-node call that timed out is unreachable")
}
