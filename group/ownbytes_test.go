package group_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// ByteRec records a copy of every []byte it is sent.
type ByteRec struct {
	mu  sync.Mutex
	got [][]byte
}

// Take records a copy of *b.
func (r *ByteRec) Take(_ context.Context, b *[]byte, out *[]byte) error {
	r.mu.Lock()
	r.got = append(r.got, bytes.Clone(*b))
	r.mu.Unlock()
	*out = []byte("ok")
	return nil
}

func (r *ByteRec) received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.got...)
}

// With SerializeNone, rpcx's codec encodes a []byte argument as the slice
// itself, and decodes one by aliasing the bytes: a group's copy of the
// arguments must still be its own. The caller overwrites its slice as soon
// as each cast returns, and every node (batch, plain, local; over a batch
// client and over a PlainCaller) must receive what it held at call time.
func TestGroupOpsOwnTheirByteArguments(t *testing.T) {
	const rounds, size = 50, 64
	opt := client.DefaultOption
	opt.SerializeType = protocol.SerializeNone
	pc := group.NewPlainCaller(opt)
	t.Cleanup(func() { pc.Close() })
	bc, err := batchclient.New(batchclient.WithDialTimeout(time.Second), batchclient.WithSerializeType(protocol.SerializeNone))
	require.NoError(t, err)
	t.Cleanup(func() { bc.Close() })
	serve := func(batch bool) (string, *ByteRec) {
		s := server.NewServer()
		if batch {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		r := new(ByteRec)
		require.NoError(t, s.RegisterName("ByteRec", r, ""))
		addr, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(stop)
		return addr, r
	}
	for cname, caller := range map[string]group.Caller{"batch client": bc, "PlainCaller": pc} {
		t.Run(cname, func(t *testing.T) {
			bAddr, bRec := serve(true)
			pAddr, pRec := serve(false)
			lAddr, lRec := missingAddr(t), new(ByteRec)
			g, err := group.New(caller, group.WithLocal(lAddr, map[string]any{"ByteRec": lRec}))
			require.NoError(t, err)
			t.Cleanup(func() { g.Close() })
			ctx := ctxT(t, 10*time.Second)
			arg := make([]byte, size)
			want := map[string]bool{}
			for round := 0; round < rounds; round++ {
				copy(arg, fmt.Sprintf("round %d %s", round, bytes.Repeat([]byte{'x'}, size)))
				want[string(arg)] = true
				require.NoError(t, group.CastAll(ctx, g, "ByteRec", "Take", arg, group.On(bAddr, pAddr, lAddr)))
				// The operation has returned: the slice is the caller's again.
				for i := range arg {
					arg[i] = '-'
				}
			}
			for i, r := range []*ByteRec{bRec, pRec, lRec} {
				eventually(t, func() bool { return len(r.received()) == rounds }, "every round reached the node")
				wrong := 0
				for _, b := range r.received() {
					if !want[string(b)] {
						wrong++
					}
				}
				require.Zero(t, wrong, "node %d: of %d casts, this many arrived with bytes the caller wrote after the cast returned", i, rounds)
			}
		})
	}
}
