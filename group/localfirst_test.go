package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Mutator's handler changes what it was given: as the local node it
// overwrites its arguments and the request metadata and rejects; as a
// remote node it answers what it received.
type Mutator struct{ local bool }

// Do rejects after mutating (local), or answers the "owner" metadata and
// A it received (remote).
func (m *Mutator) Do(ctx context.Context, a *testsvc.Args, r *Answer) error {
	md, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	if m.local {
		a.A = -999
		if md != nil {
			md["owner"] = "changed by the local handler"
		}
		return errors.New("local rejects")
	}
	r.Node, r.N = md["owner"], a.A
	return nil
}

// CallOne and CallAny try the local node first, on the caller's
// goroutine, with the caller's own arguments; a remote node tried next
// must get the arguments and request metadata as they were at call time,
// not as the local handler left them. The old CallOne took its copy only
// after the local call, so the remote node got the local handler's
// changes.
func TestLocalFirstMutationDoesNotReachRemote(t *testing.T) {
	for _, batch := range []bool{true, false} {
		s := server.NewServer()
		if batch {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		require.NoError(t, s.RegisterName("Mutator", &Mutator{}, ""))
		remote, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(stop)
		l := missingAddr(t)
		g := newGroup(t, group.WithNodes(l, remote), group.WithLocal(l, map[string]any{"Mutator": &Mutator{local: true}}))

		for _, policy := range []string{"CallOne", "CallAny"} {
			ctx := context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, map[string]string{"owner": "kept"})
			a := &testsvc.Args{A: 7, B: 6}
			var r group.Result[Answer]
			if policy == "CallOne" {
				r, err = group.CallOne[Answer](ctx, g, "Mutator", "Do", a)
			} else {
				r, err = group.CallAny[Answer](ctx, g, "Mutator", "Do", a)
			}
			require.NoError(t, err, policy)
			require.Equal(t, group.Result[Answer]{Node: remote, Value: Answer{Node: "kept", N: 7}}, r, "%s, batch server %v", policy, batch)
			require.Equal(t, -999, a.A, "the local node ran first, on the caller's own arguments")
		}
	}
}
