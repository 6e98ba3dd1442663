package batchserver_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// hooks is a server plugin with PreCall and PostCall hooks: it counts them,
// rejects Mul with A == 13, replaces Mul's argument when A == 7 and Mul's
// reply when A == 8.
type hooks struct {
	pre, post atomic.Int64
}

func (h *hooks) PreCall(_ context.Context, _, method string, args any) (any, error) {
	h.pre.Add(1)
	if a, ok := args.(*testsvc.Args); ok && method == "Mul" {
		switch a.A {
		case 13:
			return args, errors.New("precall: 13 is unlucky")
		case 7:
			return &testsvc.Args{A: 70, B: a.B}, nil
		}
	}
	return args, nil
}

func (h *hooks) PostCall(_ context.Context, _, method string, args, reply any, err error) (any, error) {
	h.post.Add(1)
	if a, ok := args.(*testsvc.Args); ok && method == "Mul" && a.A == 8 {
		return &testsvc.Reply{C: -8}, nil
	}
	return reply, err
}

// TestPreCallPostCallPlugins: batched calls run through the server's
// PreCall and PostCall plugins, which can reject a call (the client gets
// the plugin's error text) or replace its argument or reply, as on the
// plain path.
func TestPreCallPostCallPlugins(t *testing.T) {
	s, _ := newServer(t)
	h := new(hooks)
	s.Plugins.Add(h)
	addr := serve(t, s)
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 10*time.Second)

	const n = 50 // A = 0..49, one of which is 13
	var wg sync.WaitGroup
	results := make([]error, n)
	replies := make([]testsvc.Reply, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 2}, &replies[i])
		}()
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		switch i {
		case 13:
			require.Error(t, results[i])
			assert.Equal(t, "precall: 13 is unlucky", results[i].Error())
			var se client.ServiceError
			assert.True(t, errors.As(results[i], &se), "%T", results[i])
		case 7:
			require.NoError(t, results[i])
			assert.Equal(t, 140, replies[i].C, "PreCall's replacement argument was not used")
		case 8:
			require.NoError(t, results[i])
			assert.Equal(t, -8, replies[i].C, "PostCall's replacement reply was not sent")
		default:
			require.NoError(t, results[i], i)
			assert.Equal(t, 2*i, replies[i].C)
		}
	}
	assert.Equal(t, int64(n), h.pre.Load(), "PreCall runs once per batched call")
	assert.Equal(t, int64(n-1), h.post.Load(), "PostCall runs once per call that PreCall let through")

	// The plain path says the same.
	pc := plainClient(t, addr)
	for _, a := range []int{13, 7, 8} {
		var rb, rp testsvc.Reply
		errB := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: a, B: 3}, &rb)
		errP := pc.Call(ctx, "Arith", "Mul", &testsvc.Args{A: a, B: 3}, &rp)
		if errP != nil {
			require.Error(t, errB, a)
			assert.Equal(t, errP.Error(), errB.Error(), a)
			continue
		}
		require.NoError(t, errB, a)
		assert.Equal(t, rp, rb, a)
	}
}

// TestCastsRunWithoutReply: 10,000 casts all run on the server, and none
// produces a reply.
func TestCastsRunWithoutReply(t *testing.T) {
	s, p := newServer(t)
	cnt := new(Counter)
	require.NoError(t, s.RegisterName("Counter", cnt, ""))
	addr := serve(t, s)
	// A fixed lane: a pool that grows under the casts would send a fence
	// call, whose reply is the lane's own.
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 10*time.Second)

	const n = 10000
	for i := 0; i < n; i++ {
		require.NoError(t, c.Cast(ctx, addr, "Counter", "Inc", &testsvc.Args{A: i}))
	}
	if !eventually(10*time.Second, func() bool { return cnt.n.Load() >= n }) {
		t.Fatalf("%d of %d casts ran within 10 s", cnt.n.Load(), n)
	}
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, int64(n), cnt.n.Load(), "a cast ran more than once")
	assert.Equal(t, int64(n), counter(t, p.Metrics(), "rpcxbatch.server.casts"))
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.calls"))
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.reply_frames"), "a cast produced a reply frame")
}

// TestDisabledServerIsPlain: WithPoolSize(Disabled) leaves the server plain;
// clients notice and call it over plain rpcx.
func TestDisabledServerIsPlain(t *testing.T) {
	addr, _, p := startServer(t, batchserver.WithPoolSize(batchserver.Disabled))
	c := newClient(t)
	in := waitConnected(t, c, addr)
	require.True(t, in.Plain, "%+v", in)
	require.True(t, c.Info(addr).Plain)

	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	assert.Equal(t, 42, r.C)
	in2, out := []byte("hi"), []byte(nil)
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Bytes", &in2, &out))
	assert.Equal(t, "hi", string(out))
	err := c.Send(ctxT(t, 5*time.Second), addr, "h", []byte("x"))
	require.ErrorIs(t, err, batchclient.ErrNotBatchPeer)
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.frames"))
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.calls"))
}

func TestInvalidPoolSize(t *testing.T) {
	for _, opt := range []batchserver.Option{
		batchserver.WithPoolSize(-5),
		batchserver.WithBatchCap(-1),
		batchserver.WithMaxFrameBytes(-1),
		batchserver.WithWriteTimeout(-time.Second),
	} {
		s := server.NewServer()
		p, err := batchserver.New(s, opt)
		require.Error(t, err)
		assert.ErrorIs(t, err, batchserver.ErrInvalidOption)
		assert.Nil(t, p)
	}
	_, err := batchserver.New(server.NewServer(), batchserver.WithPoolSize(-5))
	assert.Contains(t, err.Error(), "-5")
}

// TestExpiredDeadlineNotExecuted: an entry whose caller's deadline had
// passed is answered with ErrDeadlinePassed and not run; the reply frame is
// stamped with the plugin's incarnation.
func TestExpiredDeadlineNotExecuted(t *testing.T) {
	s, p := newServer(t)
	cnt := new(Counter)
	require.NoError(t, s.RegisterName("Counter", cnt, ""))
	addr := serve(t, s)

	raw := rawDial(t, addr)
	hs := rawHandshake(t, raw)
	require.Equal(t, p.Incarnation(), hs.Incarnation)
	require.Equal(t, p.Options().PoolSize, hs.PoolSize)
	require.Equal(t, p.Options().BatchCap, hs.BatchCap)
	require.Equal(t, p.Options().MaxFrameBytes, hs.MaxFrameBytes)

	inc := func(id uint64, timeout int64) codec.Entry {
		return codec.Entry{Kind: codec.KindCall, ID: id, ServicePath: "Counter", ServiceMethod: "Inc",
			SerializeType: uint8(protocol.MsgPack), Payload: mustMsgpack(testsvc.Args{}), TimeoutMicros: timeout}
	}
	rawWrite(t, raw, batchMessage(frame(1, inc(1, -1))))
	got, incs := rawReadReplies(t, raw, 1, 3*time.Second)
	require.Contains(t, got, uint64(1))
	rp := got[1]
	assert.Equal(t, codec.StatusError, rp.Status)
	assert.Contains(t, rp.Error, "deadline")
	assert.Equal(t, batchserver.ErrDeadlinePassed.Error(), rp.Error)
	require.NotEmpty(t, incs)
	for _, i := range incs {
		assert.Equal(t, p.Incarnation(), i, "reply frame incarnation")
	}
	assert.Equal(t, int64(1), counter(t, p.Metrics(), "rpcxbatch.server.errors.deadline"))

	// The next frame on the same connection: an entry with no deadline runs,
	// and one whose deadline ends while it runs sees its context end.
	sleep := codec.Entry{Kind: codec.KindCall, ID: 3, ServicePath: "Arith", ServiceMethod: "Sleep",
		SerializeType: uint8(protocol.MsgPack), Payload: mustMsgpack(testsvc.Args{A: 10000, B: 1}), TimeoutMicros: 50_000}
	start := time.Now()
	rawWrite(t, raw, batchMessage(frame(2, inc(2, 0), sleep)))
	got, _ = rawReadReplies(t, raw, 2, 8*time.Second)
	require.Contains(t, got, uint64(2))
	require.Contains(t, got, uint64(3))
	assert.Equal(t, codec.StatusOK, got[2].Status, got[2].Error)
	assert.Equal(t, codec.StatusError, got[3].Status)
	assert.Contains(t, got[3].Error, "deadline")
	// Far below the handler's 10 s sleep; generous for -race on 2 busy cores.
	assert.Less(t, time.Since(start), 5*time.Second, "the entry's deadline did not reach its handler")
	assert.Equal(t, int64(1), cnt.n.Load(), "only the entry without a deadline ran")
}

// TestServerMetrics: the plugin counts frames, calls, casts, sends and the
// reply frames it wrote.
func TestServerMetrics(t *testing.T) {
	addr, _, p := startServer(t)
	require.NoError(t, p.HandleSend("h", func(context.Context, []byte) {}))
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 5*time.Second)
	for i := 0; i < 20; i++ {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 1}, &r))
	}
	require.NoError(t, c.Cast(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}))
	require.NoError(t, c.Send(ctx, addr, "h", []byte("x")))
	var r testsvc.Reply
	require.Error(t, c.Call(ctx, addr, "Arith", "Nope", &testsvc.Args{}, &r))
	require.Error(t, c.Call(ctx, addr, "Arith", "Panic", &testsvc.Args{}, &r))

	m := p.Metrics()
	ok := eventually(5*time.Second, func() bool {
		return counter(t, m, "rpcxbatch.server.casts") == 1 && counter(t, m, "rpcxbatch.server.sends") == 1
	})
	require.True(t, ok, "cast and send not counted")
	for name, want := range map[string]int64{
		"rpcxbatch.server.calls":                  22,
		"rpcxbatch.server.casts":                  1,
		"rpcxbatch.server.sends":                  1,
		"rpcxbatch.server.errors.unknown_service": 1,
		"rpcxbatch.server.errors.panic":           1,
		"rpcxbatch.server.errors.malformed":       0,
	} {
		assert.Equal(t, want, counter(t, m, name), name)
	}
	frames := counter(t, m, "rpcxbatch.server.frames")
	assert.Greater(t, frames, int64(0))
	assert.LessOrEqual(t, frames, int64(24))
	assert.Greater(t, counter(t, m, "rpcxbatch.server.reply_frames"), int64(0))
	assert.NotNil(t, m.Get("rpcxbatch.server.batch_size"), "batch_size histogram")
}
