package plainconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// EchoArgs is what EchoSvc.Echo replies with and puts in the response
// metadata; Hold makes it wait for the service's gate first.
type EchoArgs struct {
	N    int
	Meta map[string]string
	Hold bool
}

// EchoReply is EchoSvc.Echo's reply.
type EchoReply struct {
	N int
}

// EchoSvc echoes N and sets the response metadata the rpcx way.
type EchoSvc struct {
	gate chan struct{}
}

// Echo replies with a.N and copies a.Meta into the response metadata.
func (s *EchoSvc) Echo(ctx context.Context, a *EchoArgs, r *EchoReply) error {
	if a.Hold {
		<-s.gate
	}
	res, _ := ctx.Value(share.ResMetaDataKey).(map[string]string)
	for k, v := range a.Meta {
		res[k] = v
	}
	r.N = a.N
	return nil
}

// writtenLog tells, for each response the server wrote, its sequence
// number.
type writtenLog chan uint64

func (w writtenLog) PostWriteResponse(_ context.Context, req *protocol.Message, _ *protocol.Message, _ error) error {
	w <- req.Seq()
	return nil
}

// serveEcho serves EchoSvc on loopback and returns a client connected to
// it, the service's gate and the log of written responses.
func serveEcho(t *testing.T) (*client.Client, chan struct{}, writtenLog) {
	t.Helper()
	s := server.NewServer()
	svc := &EchoSvc{gate: make(chan struct{})}
	written := make(writtenLog, 16)
	s.Plugins.Add(written)
	require.NoError(t, s.RegisterName("Echo", svc, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", addr))
	t.Cleanup(func() { pc.Close() })
	return pc, svc.gate, written
}

// waitWritten waits for the server to have written n responses.
func waitWritten(t *testing.T, w writtenLog, n int) {
	t.Helper()
	for range n {
		select {
		case <-w:
		case <-time.After(5 * time.Second):
			t.Fatal("the server wrote no response within 5s")
		}
	}
}

// Call with FillResMeta fills the caller's response-metadata map as
// rpcx's own Client.Call does on the same connection; with NoResMeta it
// leaves the map alone. Both return the reply.
func TestCallResponseMetadataAsRPCX(t *testing.T) {
	pc, _, written := serveEcho(t)
	args := &EchoArgs{N: 7, Meta: map[string]string{"a": "1", "b": "two"}}

	viaRPCX := map[string]string{"mine": "x"}
	var want EchoReply
	ctx := context.WithValue(ctxT(t, 5*time.Second), share.ResMetaDataKey, viaRPCX)
	require.NoError(t, pc.Call(ctx, "Echo", "Echo", args, &want))

	viaCall := map[string]string{"mine": "x"}
	var got EchoReply
	ctx = context.WithValue(ctxT(t, 5*time.Second), share.ResMetaDataKey, viaCall)
	require.NoError(t, plainconn.Call(ctx, pc, "Echo", "Echo", args, &got, plainconn.FillResMeta))
	require.Equal(t, want, got)
	require.Equal(t, viaRPCX, viaCall)
	require.Equal(t, pc.Conn.RemoteAddr().String(), viaCall[share.ServerAddress])

	untouched := map[string]string{"mine": "x"}
	got = EchoReply{}
	ctx = context.WithValue(ctxT(t, 5*time.Second), share.ResMetaDataKey, untouched)
	require.NoError(t, plainconn.Call(ctx, pc, "Echo", "Echo", args, &got, plainconn.NoResMeta))
	require.Equal(t, want, got)
	require.Equal(t, map[string]string{"mine": "x"}, untouched)
	waitWritten(t, written, 3)
}

// A call whose context ends first returns the context's error, and its
// reply, arriving later, is not written into the caller's value; the
// client goes on serving calls.
func TestCallLateReplyNotWritten(t *testing.T) {
	pc, gate, written := serveEcho(t)
	ctx, cancel := context.WithCancel(ctxT(t, 5*time.Second))
	meta := map[string]string{}
	ctx = context.WithValue(ctx, share.ResMetaDataKey, meta)
	reply := &EchoReply{N: -1}
	errc := make(chan error, 1)
	go func() {
		errc <- plainconn.Call(ctx, pc, "Echo", "Echo", &EchoArgs{N: 41, Meta: map[string]string{"late": "yes"}, Hold: true}, reply, plainconn.FillResMeta)
	}()
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Call did not return within 5s of its context's end")
	}

	// Let the held call answer, and wait until its response is on the
	// wire: the next call's reply, on the same connection, comes after
	// it, so once that is in, rpcx has decoded the late one.
	close(gate)
	waitWritten(t, written, 1)
	var next EchoReply
	require.NoError(t, plainconn.Call(ctxT(t, 5*time.Second), pc, "Echo", "Echo", &EchoArgs{N: 2}, &next, plainconn.FillResMeta))
	require.Equal(t, 2, next.N)
	require.Equal(t, -1, reply.N, "the late reply was written into the caller's value")
	require.Empty(t, meta, "the late reply's metadata was written into the caller's map")
}
