package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// SentX is what the caller passes; TakenX is what the handler takes: the
// same JSON ("x"), different msgpack (field names).
type SentX struct {
	X int `json:"x"`
}

// TakenX is the handler's argument type.
type TakenX struct {
	Y int `json:"x"`
}

// XSvc answers the Y it received.
type XSvc struct{}

// Take answers a.Y.
func (XSvc) Take(_ context.Context, a *TakenX, r *int) error {
	*r = a.Y
	return nil
}

// The local node converts arguments of another type than its method's as
// the wire would: with the Caller's codec (here JSON), so that it gets
// what a remote node gets. The old code always converted through msgpack,
// and the local node got a zero where the remote node got 5.
func TestLocalConvertsWithCallersCodec(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("X", XSvc{}, ""))
	remote, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)

	opt := client.DefaultOption
	opt.SerializeType = protocol.JSON
	pc := group.NewPlainCaller(opt)
	t.Cleanup(func() { pc.Close() })
	l := missingAddr(t)
	g, err := group.New(pc, group.WithNodes(remote, l), group.WithLocal(l, map[string]any{"X": XSvc{}}))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })

	rs, err := group.CallAll[int](ctxT(t, 5*time.Second), g, "X", "Take", &SentX{X: 5})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.Equal(t, 5, r.Value, r.Node)
	}
	r, err := group.CallOne[int](ctxT(t, 5*time.Second), g, "X", "Take", &SentX{X: 5}, group.On(l))
	require.NoError(t, err)
	require.Equal(t, 5, r.Value, "the local node on the caller's goroutine")
}
