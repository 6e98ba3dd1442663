package batchclient_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// SkewReply is what a newer server answers: C is text where the client
// still expects a number (testsvc.Reply).
type SkewReply struct {
	C string
}

// skew counts the runs of its one method, whose reply does not fit the
// caller's reply value.
type Skew struct{ runs *atomic.Int64 }

// Run counts itself and answers a SkewReply whose text is a.A bytes long.
func (s Skew) Run(_ context.Context, a *testsvc.Args, r *SkewReply) error {
	s.runs.Add(1)
	r.C = strings.Repeat("x", a.A)
	return nil
}

// serveSkew serves skew on loopback, with the batch plugin when batch is
// set, and returns its address and its run counter.
func serveSkew(t *testing.T, batch bool) (string, *atomic.Int64) {
	t.Helper()
	s := server.NewServer()
	if batch {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	runs := new(atomic.Int64)
	require.NoError(t, s.RegisterName("Skew", Skew{runs}, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, runs
}

// TestFailoverRunsOnceWhenReplyDoesNotDecode: a reply that does not fit
// the caller's reply value (version skew) fails the call with a
// client.ServiceError, as rpcx's client turns a reply decode failure into
// one; the XClient's Failover therefore does not run the call again. Run
// side by side: plain rpcx's XClient and the drop-in, Failover with
// Retries 3, each runs the handler once. The error also matches ErrDecode.
func TestFailoverRunsOnceWhenReplyDoesNotDecode(t *testing.T) {
	opt := client.DefaultOption
	opt.Retries = 3
	opt.RetryInterval = time.Millisecond
	for _, mode := range []client.FailMode{client.Failover, client.Failtry} {
		for _, batch := range []bool{false, true} {
			name := map[bool]string{false: "plain rpcx", true: "rpcxbatch"}[batch]
			t.Run(name+"/"+map[client.FailMode]string{client.Failover: "Failover", client.Failtry: "Failtry"}[mode], func(t *testing.T) {
				addr, runs := serveSkew(t, batch)
				d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
				require.NoError(t, err)
				// An XClient per call: rpcx v1.9.4's client ends its
				// connection after a reply it cannot decode (input's loop
				// error is the decode error), failing the calls still on
				// it with that error; a call made meanwhile would see
				// that, not this test's case. (A lane goes on.)
				newXC := func() client.XClient {
					var xc client.XClient
					if batch {
						xc = batchclient.NewXClient("Skew", mode, client.RandomSelect, d, opt)
					} else {
						xc = client.NewXClient("Skew", mode, client.RandomSelect, d, opt)
					}
					t.Cleanup(func() { xc.Close() })
					return xc
				}
				// A small reply is decoded by the lane's reader, a large one
				// by the caller (Call); Go's always by the reader.
				for _, size := range []int{16, 64 << 10} {
					runs.Store(0)
					var r testsvc.Reply
					err = newXC().Call(ctxT(t, 10*time.Second), "Run", &testsvc.Args{A: size}, &r)
					require.Error(t, err)
					_, isService := err.(client.ServiceError)
					assert.True(t, isService, "Call, %d bytes: %T %v is not a client.ServiceError", size, err, err)
					assert.Equal(t, int64(1), runs.Load(), "Call, %d bytes: handler runs for one call (%v)", size, err)
					if batch {
						assert.ErrorIs(t, err, batchclient.ErrDecode)
					}
				}
				runs.Store(0)
				var r testsvc.Reply
				call, err := newXC().Go(ctxT(t, 10*time.Second), "Run", &testsvc.Args{A: 16}, &r, nil)
				require.NoError(t, err)
				select {
				case <-call.Done:
				case <-time.After(10 * time.Second):
					t.Fatal("Go did not complete")
				}
				_, isService := call.Error.(client.ServiceError)
				assert.True(t, isService, "Go: %T %v is not a client.ServiceError", call.Error, call.Error)
			})
		}
	}
}
