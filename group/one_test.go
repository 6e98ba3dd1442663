package group_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
)

// CallOne: the local node first, alone when it succeeds.
func TestCallOneLocalFirst(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	a, na := startNode(t, modeOK, true)
	b, nb := startNode(t, modeOK, false)
	l, inproc, network, opt := withLocal(t, modeOK)
	g := newGroup(t, group.WithNodes(a, b, l), opt)
	for i := 0; i < 10; i++ {
		r, err := group.CallOne[Answer](ctx, g, "Node", "Do", args)
		require.NoError(t, err)
		require.Equal(t, l, r.Node)
	}
	require.EqualValues(t, 10, inproc.calls.Load())
	require.Zero(t, na.calls.Load()+nb.calls.Load()+network.calls.Load(), "one node at a time: nobody else was called")
}

// CallOne without a local node: one node per call, in random order.
func TestCallOneRandomOrder(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	a, _ := startNode(t, modeOK, true)
	b, _ := startNode(t, modeOK, true)
	c, _ := startNode(t, modeOK, false)
	g := newGroup(t, group.WithNodes(a, b, c))
	seen := map[string]int{}
	for i := 0; i < 60; i++ {
		r, err := group.CallOne[Answer](ctx, g, "Node", "Do", args)
		require.NoError(t, err)
		seen[r.Node]++
	}
	require.Len(t, seen, 3, "60 calls in random order reach every node: %v", seen)
}

// CallOne: rejections accumulate and the next node is tried; an
// unreachable node is skipped unless Unreachable(true); all unreachable by
// default is an empty Rejections; an empty list is ErrEmptyNodes.
func TestCallOneRejectionsAndUnreachable(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	r1, _ := startNode(t, modeReject, true)
	r2, _ := startNode(t, modePanic, false)
	ok, _ := startNode(t, modeOK, true)
	m := missingAddr(t)
	l, _, _, opt := withLocal(t, modeReject)
	g := newGroup(t, group.WithNodes(r1, r2, m, ok, l), opt)

	res, err := group.CallOne[Answer](ctx, g, "Node", "Do", args)
	require.NoError(t, err)
	require.Equal(t, ok, res.Node)

	_, err = group.CallOne[Answer](ctx, g, "Node", "Do", args, group.On(r1, r2, m, l))
	var rej group.Rejections
	require.ErrorAs(t, err, &rej)
	require.Equal(t, l, rej[0].Node, "the local node is tried first")
	require.ElementsMatch(t, []string{l, r1, r2}, errNodes(rej))

	_, err = group.CallOne[Answer](ctx, g, "Node", "Do", args, group.On(r1, r2, m, l), group.Unreachable(true))
	require.ErrorAs(t, err, &rej)
	require.ElementsMatch(t, []string{l, r1, r2, m}, errNodes(rej))
	require.ErrorIs(t, err, group.ErrUnreachable)
	require.ErrorIs(t, err, group.ErrPanic)

	_, err = group.CallOne[Answer](ctx, g, "Node", "Do", args, group.On(m, m))
	require.ErrorAs(t, err, &rej)
	require.Empty(t, rej, "every node unreachable: {error, []}")
	require.NotErrorIs(t, err, group.ErrNoneAvailable)

	_, err = group.CallOne[Answer](ctx, g, "Node", "Do", args, group.On(m), group.Unreachable(true))
	require.ErrorAs(t, err, &rej)
	require.Equal(t, []string{m}, errNodes(rej))

	_, err = group.CallOne[Answer](ctx, g, "Node", "Do", args, group.On())
	require.ErrorIs(t, err, group.ErrEmptyNodes)
}

// CastOne: the local node when present, else one random node; returns at
// once.
func TestCastOne(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	a, na := startNode(t, modeOK, true)
	b, nb := startNode(t, modeOK, false)
	l, inproc, network, opt := withLocal(t, modeOK)
	g := newGroup(t, group.WithNodes(a, b, l), opt)

	require.NoError(t, group.CastOne(ctx, g, "Node", "Do", args))
	eventually(t, func() bool { return inproc.done.Load() == 1 }, "the local node ran the cast")

	for i := 0; i < 20; i++ {
		require.NoError(t, group.CastOne(ctx, g, "Node", "Do", args, group.On(a, b)))
	}
	eventually(t, func() bool { return na.done.Load()+nb.done.Load() == 20 }, "20 casts ran, one node each")
	require.NotZero(t, na.done.Load(), "random choice")
	require.NotZero(t, nb.done.Load(), "random choice")
	require.Zero(t, network.calls.Load())

	start := time.Now()
	hang, nh := startNode(t, modeHang, true)
	require.NoError(t, group.CastOne(ctx, g, "Node", "Do", args, group.On(hang)))
	require.Less(t, time.Since(start), 5*time.Second, "a cast does not wait for the handler") // it hangs 10 s
	eventually(t, func() bool { return nh.calls.Load() == 1 }, "the hanging node got the cast")
	require.ErrorIs(t, group.CastOne(ctx, g, "Node", "Do", args, group.On()), group.ErrEmptyNodes)
}

// CastAll: every entry of the list, the local node included, without
// waiting; unreachable nodes are not reported.
func TestCastAll(t *testing.T) {
	a, na := startNode(t, modeOK, true)
	b, nb := startNode(t, modeOK, false)
	m := missingAddr(t)
	l, inproc, network, opt := withLocal(t, modeOK)
	g := newGroup(t, group.WithNodes(a, b, m, l, a), opt)
	require.NoError(t, group.CastAll(ctxT(t, 5*time.Second), g, "Node", "Do", args))
	eventually(t, func() bool {
		return na.done.Load() == 2 && nb.done.Load() == 1 && inproc.done.Load() == 1
	}, "every entry ran the cast")
	require.Zero(t, network.calls.Load())
	// An empty list casts to no node, and is no error; a cast to b alone
	// after it is the marker that anything it had sent would have run.
	require.NoError(t, group.CastAll(ctxT(t, time.Second), g, "Node", "Do", args, group.On()))
	require.NoError(t, group.CastAll(ctxT(t, time.Second), g, "Node", "Do", args, group.On(b)))
	eventually(t, func() bool { return nb.done.Load() == 2 }, "the cast to b alone ran")
	require.Equal(t, int64(2), na.done.Load(), "a cast with an empty list reached a")
	require.Equal(t, int64(1), inproc.done.Load(), "a cast with an empty list ran locally")
}
