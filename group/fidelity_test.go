package group_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
)

// result_fidelity: a 100k-element list, a 1 MiB binary, and an error whose
// text looks like a result come back intact from batch, plain and local
// nodes.
func TestResultFidelity(t *testing.T) {
	// A bound on liveness, not on speed: 100k ints and 1 MiB under -race on
	// a busy two-core machine took past 10 s.
	ctx := ctxT(t, 30*time.Second)
	a, _ := startNode(t, modeOK, true)
	p, _ := startNode(t, modeOK, false)
	l, _, _, _ := withLocal(t, modeOK)
	g := newGroup(t, group.WithNodes(a, p, l), group.WithLocal(l, map[string]any{"Node": &Node{mode: modeOK}, "Echo": new(echoLocal)}))

	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	rs, err := group.CallAll[[]byte](ctx, g, "Echo", "Bytes", &big)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	for _, r := range rs {
		require.True(t, bytes.Equal(big, r.Value), r.Node)
	}

	ints := make([]int, 100_000)
	for i := range ints {
		ints[i] = i * 3
	}
	ri, err := group.CallAll[[]int](ctx, g, "Node", "Ints", &ints)
	require.NoError(t, err)
	for _, r := range ri {
		require.Equal(t, ints, r.Value, r.Node)
	}

	text := "{ecall_result,{ok,wrapped}}"
	_, errs := group.CallAllWait[Answer](ctx, g, "Node", "Fail", &text)
	require.Len(t, errs, 3)
	for _, e := range errs {
		require.ErrorIs(t, e, group.ErrRejected)
		require.Equal(t, text, e.Err.Error(), e.Node)
	}
}

// echoLocal is the local node's Echo; its reply type differs from the
// caller's (a named slice), so the reply is copied through msgpack.
type echoLocal struct{}

type blob []byte

// Bytes echoes bytes.
func (echoLocal) Bytes(_ context.Context, b *[]byte, r *blob) error {
	*r = *b
	return nil
}

// duplicate_nodes: each entry of the list is called and reported.
func TestDuplicateNodes(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	a, na := startNode(t, modeOK, true)
	b, nb := startNode(t, modeOK, false)
	l, inproc, _, opt := withLocal(t, modeOK)
	g := newGroup(t, group.WithNodes(a, a, b, l, l), opt)

	rs, err := group.CallAll[Answer](ctx, g, "Node", "Do", args)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a, a, b, l, l}, nodesOf(rs))
	rs, errs := group.CallAllWait[Answer](ctx, g, "Node", "Do", args)
	require.Empty(t, errs)
	require.ElementsMatch(t, []string{a, a, b, l, l}, nodesOf(rs))
	require.EqualValues(t, 4, na.calls.Load())
	require.EqualValues(t, 2, nb.calls.Load())
	require.EqualValues(t, 4, inproc.calls.Load())

	r, _ := startNode(t, modeReject, true)
	_, errs = group.CallAllWait[Answer](ctx, g, "Node", "Do", args, group.On(r, r, r))
	require.Equal(t, []string{r, r, r}, errNodes(errs))
	_, err = group.CallAny[Answer](ctx, g, "Node", "Do", args, group.On(r, r))
	var rej group.Rejections
	require.ErrorAs(t, err, &rej)
	require.Equal(t, []string{r, r}, errNodes(rej))
}

// empty_groups: every policy on an empty list.
func TestEmptyGroups(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	g := newGroup(t)
	_, err := group.CallOne[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrEmptyNodes)
	_, err = group.CallAny[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrEmptyNodes)
	require.ErrorIs(t, err, group.ErrNoneAvailable)
	_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args)
	require.ErrorIs(t, err, group.ErrEmptyNodes)
	require.ErrorIs(t, err, group.ErrNoneAvailable)
	rs, errs := group.CallAllWait[Answer](ctx, g, "Node", "Do", args)
	require.NotNil(t, rs)
	require.NotNil(t, errs)
	require.Empty(t, rs)
	require.Empty(t, errs)
	require.ErrorIs(t, group.CastOne(ctx, g, "Node", "Do", args), group.ErrEmptyNodes)
	require.NoError(t, group.CastAll(ctx, g, "Node", "Do", args))
}

// Both paths: a group over plain rpcx clients reaches batch and plain
// servers alike, as the batch client does.
func TestPlainCallerMixedList(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	a, _ := startNode(t, modeOK, true)
	p, _ := startNode(t, modeOK, false)
	r, _ := startNode(t, modeReject, false)
	m := missingAddr(t)
	pc := group.NewPlainCaller(client.DefaultOption)
	t.Cleanup(func() { pc.Close() })
	g, err := group.New(pc, group.WithNodes("tcp@"+a, p, r, m))
	require.NoError(t, err)
	require.Equal(t, []string{a, p, r, m}, g.Nodes(), `"tcp@" is dropped`)

	rs, errs := group.CallAllWait[Answer](ctx, g, "Node", "Do", args)
	require.ElementsMatch(t, []string{a, p}, nodesOf(rs))
	require.ElementsMatch(t, []string{r, m}, errNodes(errs))
	for _, e := range errs {
		if e.Node == m {
			require.ErrorIs(t, e, group.ErrUnreachable)
		} else {
			require.ErrorIs(t, e, group.ErrRejected)
		}
	}
	_, err = group.CallAll[Answer](ctx, g, "Node", "Do", args, group.On(a, p))
	require.NoError(t, err)
}

// Node lists from an rpcx ServiceDiscovery follow its changes.
func TestDiscoveryNodes(t *testing.T) {
	a, _ := startNode(t, modeOK, true)
	b, _ := startNode(t, modeOK, false)
	d, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + a}})
	require.NoError(t, err)
	g := newGroup(t, group.WithDiscovery(d))
	require.Equal(t, []string{a}, g.Nodes())

	d.Update([]*client.KVPair{{Key: "tcp@" + a}, {Key: "tcp@" + b}})
	eventually(t, func() bool { return len(g.Nodes()) == 2 }, "the group follows the discovery")
	rs, err := group.CallAll[Answer](ctxT(t, 5*time.Second), g, "Node", "Do", args)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a, b}, nodesOf(rs))
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "Close is idempotent")
}

// WithLocal and New reject what they cannot use.
func TestNewValidates(t *testing.T) {
	_, err := group.New(nil)
	require.Error(t, err)
	bc := newBatchClient(t)
	_, err = group.New(bc, group.WithLocal("127.0.0.1:1", map[string]any{"X": struct{}{}}))
	require.ErrorContains(t, err, "no method")
	_, err = group.New(bc, group.WithLocal("", nil))
	require.Error(t, err)
	_, err = group.New(bc, group.WithDiscovery(nil))
	require.Error(t, err)
}
