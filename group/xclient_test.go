package group_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/selector"
)

// The drop-in XClient runs the group policy its call's context names;
// without one it is the XClient it wraps.
func TestXClientPolicyFromContext(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	a, na := startNode(t, modeOK, true)
	b, nb := startNode(t, modeOK, false)
	bc := newBatchClient(t)
	d, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + a}, {Key: "tcp@" + b}})
	require.NoError(t, err)
	g, err := group.New(bc, group.WithDiscovery(d))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	xc := group.NewXClient(batchclient.NewXClientWith(bc, "Node", client.Failtry, client.RandomSelect, d, client.DefaultOption), "Node", g)
	t.Cleanup(func() { xc.Close() })

	var one Answer
	require.NoError(t, xc.Call(ctx, "Do", args, &one), "no policy: rpcx's own call")
	require.Contains(t, []string{a, b}, one.Node)

	var all []group.Result[Answer]
	require.NoError(t, xc.Call(selector.WithPolicy(ctx, selector.CallAll), "Do", args, &all))
	require.ElementsMatch(t, []string{a, b}, nodesOf(all))

	var any Answer
	require.NoError(t, xc.Call(selector.WithPolicy(ctx, selector.CallAny), "Do", args, &any))
	require.Equal(t, 7, any.N)

	var wait []group.Result[Answer]
	require.NoError(t, xc.Call(selector.WithPolicy(ctx, selector.CallAllWait), "Do", args, &wait))
	require.Len(t, wait, 2)

	var first Answer
	require.NoError(t, xc.Call(selector.WithPolicy(ctx, selector.CallOne), "Do", args, &first))
	require.Contains(t, []string{a, b}, first.Node)

	require.NoError(t, xc.Call(selector.WithPolicy(ctx, selector.CastAll), "Do", markedArgs, nil))
	eventually(t, func() bool { return na.marked.Load() == 1 && nb.marked.Load() == 1 }, "cast to both")

	var wrong Answer
	require.ErrorContains(t, xc.Call(selector.WithPolicy(ctx, selector.CallAll), "Do", args, &wrong), "slice")
}
