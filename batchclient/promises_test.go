package batchclient_test

// Tests of README promises (Semantics, Failure semantics) that no other
// test drove: each names the promise it checks.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// recorder is a service that records what its callers sent: the
// connection each call came on, and the arguments of casts.
type recorder struct {
	mu    sync.Mutex
	conns map[string]int
	got   []int
}

// Where counts the call under the client address of its connection and
// returns A.
func (r *recorder) Where(ctx context.Context, a *testsvc.Args, rep *testsvc.Reply) error {
	conn, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if conn == nil {
		return errors.New("no connection in the context")
	}
	r.mu.Lock()
	r.conns[conn.RemoteAddr().String()]++
	r.mu.Unlock()
	rep.C = a.A
	return nil
}

// Note records A.
func (r *recorder) Note(_ context.Context, a *testsvc.Args, rep *testsvc.Reply) error {
	r.mu.Lock()
	r.got = append(r.got, a.A)
	r.mu.Unlock()
	rep.C = a.A
	return nil
}

func (r *recorder) noted() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.got...)
}

func (r *recorder) perConn() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ns []int
	for _, n := range r.conns {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	return ns
}

// startRecorder serves a recorder as "Rec" (and Arith) on loopback, with
// the batch plugin unless plain; sends to "rec" are noted too.
func startRecorder(t *testing.T, plain bool) (string, *recorder, *[][]byte, *sync.Mutex) {
	t.Helper()
	s := server.NewServer()
	rec := &recorder{conns: map[string]int{}}
	require.NoError(t, s.RegisterName("Rec", rec, ""))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	var sent [][]byte
	var mu sync.Mutex
	if !plain {
		p, err := batchserver.New(s)
		require.NoError(t, err)
		require.NoError(t, p.HandleSend("rec", func(_ context.Context, b []byte) {
			mu.Lock()
			sent = append(sent, append([]byte(nil), b...))
			mu.Unlock()
		}))
	}
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, rec, &sent, &mu
}

// "Entries without a key are spread round-robin over the lanes"; with a
// key, one lane takes them all.
func TestKeylessEntriesRoundRobin(t *testing.T) {
	addr, rec, _, _ := startRecorder(t, false)
	c := newClient(t, batchclient.WithLanes(4))
	require.Equal(t, 4, waitConnected(t, c, addr).Lanes)
	for i := 0; i < 40; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Rec", "Where", &testsvc.Args{A: i}, &r))
		require.Equal(t, i, r.C)
	}
	assert.Equal(t, []int{10, 10, 10, 10}, rec.perConn(), "40 calls without a key over 4 lanes")

	rec.mu.Lock()
	rec.conns = map[string]int{}
	rec.mu.Unlock()
	ctx := batchclient.WithKey(ctxT(t, 5*time.Second), "one key")
	for i := 0; i < 20; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Rec", "Where", &testsvc.Args{A: i}, &r))
	}
	assert.Equal(t, []int{20}, rec.perConn(), "20 calls with one key")
}

// "Go, Cast and Send encode their arguments before they return, on the
// caller's goroutine, so the caller may reuse them at once."
func TestArgumentsReusableAtOnce(t *testing.T) {
	addr, rec, sent, mu := startRecorder(t, false)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	const n = 300
	ctx := ctxT(t, 20*time.Second)

	// Go: one argument value, overwritten as soon as each Go returns.
	done := make(chan *client.Call, n)
	var args testsvc.Args
	for i := 0; i < n; i++ {
		args = testsvc.Args{A: i}
		c.Go(ctx, addr, "Rec", "Where", &args, &testsvc.Reply{}, done)
		args = testsvc.Args{A: -1}
	}
	seen := map[int]bool{}
	for range n {
		call := <-done
		require.NoError(t, call.Error)
		seen[call.Reply.(*testsvc.Reply).C] = true
	}
	assert.Len(t, seen, n, "Go: some calls ran with the overwritten arguments")
	assert.False(t, seen[-1], "Go: a call ran with the overwritten arguments")

	// Cast: the same.
	for i := 0; i < n; i++ {
		args = testsvc.Args{A: i}
		require.NoError(t, c.Cast(ctx, addr, "Rec", "Note", &args))
		args = testsvc.Args{A: -1}
	}
	require.Eventually(t, func() bool { return len(rec.noted()) == n }, 10*time.Second, time.Millisecond)
	got := rec.noted()
	sort.Ints(got)
	for i, v := range got {
		require.Equal(t, i, v, "Cast: a cast ran with the overwritten arguments")
	}

	// Send: one payload buffer, overwritten as soon as each Send returns.
	buf := make([]byte, 8)
	kctx := batchclient.WithKey(ctx, "k")
	for i := 0; i < n; i++ {
		copy(buf, fmt.Sprintf("%08d", i))
		require.NoError(t, c.Send(kctx, addr, "rec", buf))
		copy(buf, "XXXXXXXX")
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(*sent) == n }, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for i, b := range *sent {
		require.Equal(t, fmt.Sprintf("%08d", i), string(b), "Send: a send carried the overwritten payload")
	}
}

// onewayCounter is an rpcx server plugin that counts the requests it reads
// by oneway flag.
type onewayCounter struct {
	mu             sync.Mutex
	oneway, twoway map[string]int
}

func (o *onewayCounter) PostReadRequest(_ context.Context, m *protocol.Message, _ error) error {
	if m == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := m.ServicePath + "." + m.ServiceMethod
	if m.IsOneway() {
		o.oneway[k]++
	} else {
		o.twoway[k]++
	}
	return nil
}

func (o *onewayCounter) counts(k string) (oneway, twoway int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.oneway[k], o.twoway[k]
}

// "Cast runs a service method with no reply (a plain server gets an rpcx
// oneway call)", side by side with plain rpcx's own oneway call.
func TestCastToPlainServerIsOneway(t *testing.T) {
	s := server.NewServer()
	oc := &onewayCounter{oneway: map[string]int{}, twoway: map[string]int{}}
	s.Plugins.Add(oc)
	rec := &recorder{conns: map[string]int{}}
	require.NoError(t, s.RegisterName("Rec", rec, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))

	// Plain rpcx's oneway call, for reference.
	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", addr))
	t.Cleanup(func() { pc.Close() })
	// rpcx v1.9.4 sends a call with a nil reply as a oneway request.
	require.NoError(t, pc.Call(ctxT(t, 5*time.Second), "Rec", "Note", &testsvc.Args{A: 1}, nil))
	require.Eventually(t, func() bool { ow, _ := oc.counts("Rec.Note"); return ow == 1 }, 5*time.Second, time.Millisecond,
		"plain rpcx's reference oneway call")

	c := newClient(t)
	require.True(t, waitConnected(t, c, addr).Plain)
	for i := 2; i <= 6; i++ {
		require.NoError(t, c.Cast(ctxT(t, 5*time.Second), addr, "Rec", "Note", &testsvc.Args{A: i}))
	}
	require.Eventually(t, func() bool { return len(rec.noted()) == 6 }, 5*time.Second, time.Millisecond, "the casts ran")
	ow, tw := oc.counts("Rec.Note")
	assert.Equal(t, 6, ow, "casts to a plain server that were not oneway requests")
	assert.Zero(t, tw, "a cast became a two-way rpcx call")
}

// "Calls in flight fail with ErrStopped on Stop" (see lanefail_test.go)
// "and ErrClosed on Close": errors.go's ErrClosed "is returned after
// Close, and to calls in flight at Close".
func TestCloseFailsCallsInFlight(t *testing.T) {
	addr, p := startServer(t, false)
	c, err := batchclient.New()
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	waitConnected(t, c, addr)
	calls := p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 })
	done := make(chan *client.Call, 4)
	for i := 0; i < 4; i++ {
		c.Go(ctxT(t, 10*time.Second), addr, "Arith", "Sleep", &testsvc.Args{A: 5000, B: i}, &testsvc.Reply{}, done)
	}
	require.Eventually(t, func() bool { return calls.Count() == 4 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close())
	for range 4 {
		select {
		case call := <-done:
			assert.ErrorIs(t, call.Error, batchclient.ErrClosed, "a call in flight at Close")
			assert.ErrorIs(t, call.Error, batchclient.ErrStopped, "a call in flight at Close (Close stops every connection)")
		case <-time.After(5 * time.Second):
			t.Fatal("a call in flight at Close did not return")
		}
	}
	err = c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &testsvc.Reply{})
	assert.ErrorIs(t, err, batchclient.ErrClosed, "a call after Close")
}

// prefixCodec is a codec of this test's own, registered in share.Codecs
// under serialize type 9: JSON behind a magic prefix, which only this
// codec writes and reads.
type prefixCodec struct{}

var prefixMagic = []byte("PFX1")

func (prefixCodec) Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(append([]byte(nil), prefixMagic...), b...), err
}

func (prefixCodec) Decode(b []byte, v any) error {
	if !bytes.HasPrefix(b, prefixMagic) {
		return fmt.Errorf("prefixCodec: no magic prefix in %q", b)
	}
	return json.Unmarshal(b[len(prefixMagic):], v)
}

const prefixType protocol.SerializeType = 9

func init() { share.Codecs[prefixType] = prefixCodec{} }

// "A codec registered under another serialize type is used as
// registered": JSON and a codec of the test's own, end to end, on the
// batch path and the plain path alike.
func TestNonMsgpackSerializeTypes(t *testing.T) {
	batchAddr, _ := startServer(t, false)
	plainAddr, _ := startServer(t, true)
	for _, st := range []protocol.SerializeType{protocol.JSON, prefixType} {
		c := newClient(t, batchclient.WithSerializeType(st))
		for _, addr := range []string{batchAddr, plainAddr} {
			in := waitConnected(t, c, addr)
			name := fmt.Sprintf("type %d, plain %v", st, in.Plain)
			for i := 1; i <= 20; i++ {
				var r testsvc.Reply
				require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: i, B: 7}, &r), name)
				require.Equal(t, 7*i, r.C, name)
			}
			call := <-c.Go(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 9}, &testsvc.Reply{}, nil).Done
			require.NoError(t, call.Error, name)
			require.Equal(t, 54, call.Reply.(*testsvc.Reply).C, name)
			d := testsvc.NewData(3)
			var back testsvc.Data
			require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Data", d, &back), name)
			require.Equal(t, *d, back, name)
			// A server-side error comes back the same way.
			err := c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Reject", &testsvc.Args{}, &testsvc.Reply{})
			require.Error(t, err, name)
			assert.Equal(t, testsvc.ErrRejected.Error(), err.Error(), name)
		}
	}
}
