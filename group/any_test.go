package group_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
)

// any_success: the winner is in the list and the call ran on every node;
// with the local node in the list the local node wins, without the network,
// and the call is cast to the rest.
func TestCallAnySuccess(t *testing.T) {
	t.Run("remote", func(t *testing.T) {
		a, na := startNode(t, modeOK, true)
		b, nb := startNode(t, modeOK, true)
		p, np := startNode(t, modeOK, false)
		g := newGroup(t, group.WithNodes(a, b, p))
		r, err := group.CallAny[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args)
		require.NoError(t, err)
		require.Contains(t, []string{a, b, p}, r.Node)
		require.Equal(t, Answer{Node: r.Node, N: 7}, r.Value)
		eventually(t, func() bool { return na.done.Load() == 1 && nb.done.Load() == 1 && np.done.Load() == 1 },
			"the call ran on every node")
	})
	t.Run("local", func(t *testing.T) {
		a, na := startNode(t, modeOK, true)
		p, np := startNode(t, modeOK, false)
		l, inproc, network, opt := withLocal(t, modeOK)
		g := newGroup(t, group.WithNodes(a, l, p), opt)
		r, err := group.CallAny[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args)
		require.NoError(t, err)
		require.Equal(t, group.Result[Answer]{Node: l, Value: Answer{Node: l, N: 7}}, r)
		require.EqualValues(t, 1, inproc.calls.Load())
		// The rest get a cast, which they run; the local server's network
		// side never sees the call.
		eventually(t, func() bool { return na.done.Load() == 1 && np.done.Load() == 1 }, "cast reached the rest")
		require.Zero(t, network.calls.Load())
	})
}

// any_rejections: [Local] rejecting gives its rejection; all rejecting
// gives one rejection per node, panics included, each of its kind.
func TestCallAnyRejections(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	t.Run("local alone", func(t *testing.T) {
		l, _, _, opt := withLocal(t, modeReject)
		g := newGroup(t, group.WithNodes(l), opt)
		_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
		var rej group.Rejections
		require.ErrorAs(t, err, &rej)
		require.Len(t, rej, 1)
		require.Equal(t, l, rej[0].Node)
		require.ErrorIs(t, rej[0], group.ErrRejected)
		require.ErrorIs(t, rej[0], errNodeRejected) // the handler's own error, in-process
	})
	for _, withL := range []bool{false, true} {
		t.Run(map[bool]string{false: "all reject", true: "all reject with local"}[withL], func(t *testing.T) {
			a, _ := startNode(t, modeReject, true)
			b, _ := startNode(t, modeReject, false)
			nodes, opts := []string{a, b}, []group.Option(nil)
			if withL {
				l, _, _, opt := withLocal(t, modeReject)
				nodes, opts = append(nodes, l), append(opts, opt)
			}
			g := newGroup(t, append(opts, group.WithNodes(nodes...))...)
			_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
			var rej group.Rejections
			require.ErrorAs(t, err, &rej)
			require.ElementsMatch(t, nodes, errNodes(rej))
			if withL {
				require.Equal(t, nodes[2], rej[0].Node, "the local rejection comes first")
			}
			for _, e := range rej {
				require.ErrorIs(t, e, group.ErrRejected)
				require.NotErrorIs(t, e, group.ErrUnreachable)
				require.NotErrorIs(t, e, group.ErrPanic)
				require.Contains(t, e.Error(), errNodeRejected.Error())
			}
		})
	}
}

// any_unreachable: [Missing] is none available, or its unreachable error
// with Unreachable(true); [Local, Missing] with a local rejection gives the
// local rejection only.
func TestCallAnyUnreachable(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	m := missingAddr(t)
	g := newGroup(t, group.WithNodes(m))

	_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrNoneAvailable)
	require.NotErrorIs(t, err, group.ErrEmptyNodes)

	_, err = group.CallAny[Answer](ctx, g, "Node", "Do", args, group.Unreachable(true))
	var rej group.Rejections
	require.ErrorAs(t, err, &rej)
	require.Len(t, rej, 1)
	require.Equal(t, m, rej[0].Node)
	require.ErrorIs(t, rej[0], group.ErrUnreachable)
	require.NotErrorIs(t, rej[0], group.ErrRejected)
	require.True(t, rej[0].Unreachable())

	l, _, _, opt := withLocal(t, modeReject)
	gl := newGroup(t, group.WithNodes(l, m), opt)
	_, err = group.CallAny[Answer](ctx, gl, "Node", "Do", args)
	require.ErrorAs(t, err, &rej)
	require.Equal(t, []string{l}, errNodes(rej))
	require.ErrorIs(t, err, group.ErrRejected)
}

// any_mixed_results: a panic is a rejection carrying the panic (ErrPanic,
// *PanicError), a rejection is the handler's error, on batch servers, plain
// servers and the local node alike.
func TestCallAnyMixedResults(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	bp, _ := startNode(t, modePanic, true)
	pp, _ := startNode(t, modePanic, false)
	br, _ := startNode(t, modeReject, true)
	pr, _ := startNode(t, modeReject, false)
	l, _, _, opt := withLocal(t, modePanic)
	g := newGroup(t, group.WithNodes(bp, pp, br, pr, l), opt)

	_, err := group.CallAny[Answer](ctx, g, "Node", "Do", args)
	var rej group.Rejections
	require.ErrorAs(t, err, &rej)
	require.Len(t, rej, 5)
	byNode := map[string]*group.NodeError{}
	for _, e := range rej {
		byNode[e.Node] = e
	}
	for _, n := range []string{bp, pp, l} {
		e := byNode[n]
		require.ErrorIs(t, e, group.ErrPanic, n)
		require.ErrorIs(t, e, group.ErrRejected, n)
		var pe *group.PanicError
		require.ErrorAs(t, e, &pe)
		require.Contains(t, pe.Error(), "node exploded")
	}
	var pe *group.PanicError
	require.ErrorAs(t, byNode[l], &pe)
	require.Equal(t, "node exploded", pe.Value, "a local panic carries the panic value itself")
	for _, n := range []string{br, pr} {
		require.ErrorIs(t, byNode[n], group.ErrRejected, n)
		require.NotErrorIs(t, byNode[n], group.ErrPanic, n)
	}

	// One success among them wins.
	ok, _ := startNode(t, modeOK, true)
	r, err := group.CallAny[Answer](ctx, g, "Node", "Do", args, group.On(bp, pp, br, pr, ok))
	require.NoError(t, err)
	require.Equal(t, ok, r.Node)
	require.True(t, errors.Is(group.ErrEmptyNodes, group.ErrNoneAvailable))
}
