package batchserver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/serverplugin"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The plain side of the side-by-side tests is rpcx itself: a server
// without the batch plugin and rpcx's own client.

// newPlainServer returns an rpcx server without the batch plugin, with
// Arith and Counter registered.
func newPlainServer(t testing.TB) *server.Server {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	require.NoError(t, s.RegisterName("Counter", new(Counter), ""))
	return s
}

// refusalCounter counts the oneway requests a hook refused: rpcx runs
// PreWriteResponse for them with no response and the hook's error.
type refusalCounter struct{ n atomic.Int64 }

func (r *refusalCounter) PreWriteResponse(_ context.Context, _, res *protocol.Message, err error) error {
	if res == nil && errors.Is(err, server.ErrReqReachLimit) {
		r.n.Add(1)
	}
	return nil
}

// TestReqRateLimitingSameAsPlain: rpcx's own ReqRateLimitingPlugin with a
// bucket of 20 (refilled once an hour, so the test sees exactly 20) lets
// 20 of 200 concurrent calls through on both paths, and the refused
// callers get rpcx's error text on both. It is added to the batch server
// after batchserver.New: plugins added later take part too. Casts and
// sends are limited the same way and refused silently, as rpcx refuses a
// oneway request.
func TestReqRateLimitingSameAsPlain(t *testing.T) {
	const n, limit = 200, 20
	run := func(call func(ctx context.Context) error) (ok int, refused map[string]int) {
		var mu sync.Mutex
		refused = make(map[string]int)
		ctx := ctxT(t, 20*time.Second)
		concurrently(t, n, func(int) error {
			err := call(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else {
				refused[err.Error()]++
			}
			return nil
		})
		return ok, refused
	}

	ps := newPlainServer(t)
	ps.Plugins.Add(serverplugin.NewReqRateLimitingPlugin(time.Hour, limit, false))
	pc := plainClient(t, serve(t, ps))
	okPlain, refusedPlain := run(func(ctx context.Context) error {
		var r testsvc.Reply
		return pc.Call(ctx, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r)
	})

	bs, _ := newServer(t)
	bs.Plugins.Add(serverplugin.NewReqRateLimitingPlugin(time.Hour, limit, false))
	addr := serve(t, bs)
	c := newClient(t, batchclient.WithLanes(2))
	waitConnected(t, c, addr)
	okBatch, refusedBatch := run(func(ctx context.Context) error {
		var r testsvc.Reply
		return c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r)
	})

	t.Logf("plain: %d ok, refused %v; batch: %d ok, refused %v", okPlain, refusedPlain, okBatch, refusedBatch)
	assert.Equal(t, limit, okPlain)
	assert.Equal(t, okPlain, okBatch)
	assert.Equal(t, refusedPlain, refusedBatch)
	assert.Equal(t, map[string]int{server.ErrReqReachLimit.Error(): n - limit}, refusedBatch)

	// The lanes survived the refusals: the batch client is still connected
	// and no call went the plain way.
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
}

// TestReqRateLimitingCastsAndSends: casts (plain: oneway calls) and sends
// are limited per entry too, and refused without a reply.
func TestReqRateLimitingCastsAndSends(t *testing.T) {
	const n, limit = 40, 5
	ctx := ctxT(t, 20*time.Second)

	// Plain rpcx: oneway calls.
	ps := server.NewServer()
	plainCounter := new(Counter)
	require.NoError(t, ps.RegisterName("Counter", plainCounter, ""))
	plainRefused := new(refusalCounter)
	ps.Plugins.Add(serverplugin.NewReqRateLimitingPlugin(time.Hour, limit, false))
	ps.Plugins.Add(plainRefused)
	pc := plainClient(t, serve(t, ps))
	for i := 0; i < n; i++ {
		require.NoError(t, pc.Call(ctx, "Counter", "Inc", &testsvc.Args{}, nil))
	}
	require.True(t, eventually(10*time.Second, func() bool {
		return plainCounter.n.Load()+plainRefused.n.Load() == n
	}), "plain: %d ran, %d refused", plainCounter.n.Load(), plainRefused.n.Load())

	// Batch: casts.
	bs := server.NewServer()
	batchCounter := new(Counter)
	require.NoError(t, bs.RegisterName("Counter", batchCounter, ""))
	bp, err := batchserver.New(bs)
	require.NoError(t, err)
	batchRefused := new(refusalCounter)
	bs.Plugins.Add(serverplugin.NewReqRateLimitingPlugin(time.Hour, limit, false))
	bs.Plugins.Add(batchRefused)
	var sent atomic.Int64
	require.NoError(t, bp.HandleSend("inbox", func(context.Context, []byte) { sent.Add(1) }))
	addr := serve(t, bs)
	c := newClient(t, batchclient.WithLanes(2))
	waitConnected(t, c, addr)
	for i := 0; i < n; i++ {
		require.NoError(t, c.Cast(ctx, addr, "Counter", "Inc", &testsvc.Args{}))
	}
	require.True(t, eventually(10*time.Second, func() bool {
		return batchCounter.n.Load()+batchRefused.n.Load() == n
	}), "batch: %d ran, %d refused", batchCounter.n.Load(), batchRefused.n.Load())
	assert.Equal(t, int64(limit), plainCounter.n.Load())
	assert.Equal(t, plainCounter.n.Load(), batchCounter.n.Load())
	assert.Equal(t, plainRefused.n.Load(), batchRefused.n.Load())

	// Sends: the bucket is empty now, so every one is refused.
	for i := 0; i < 10; i++ {
		require.NoError(t, c.Send(ctx, addr, "inbox", []byte("x")))
	}
	require.True(t, eventually(10*time.Second, func() bool { return batchRefused.n.Load() == n-limit+10 }),
		"sends refused: %d", batchRefused.n.Load()-(n-limit))
	assert.Zero(t, sent.Load())
	assert.Equal(t, int64(n-limit+10), counter(t, bp.Metrics(), "rpcxbatch.server.errors.refused"))
}

// TestAliasPluginSameAsPlain: rpcx's AliasPlugin rewrites a batched call's,
// cast's and send's service path and method as it rewrites a plain
// request's.
func TestAliasPluginSameAsPlain(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	alias := func() *serverplugin.AliasPlugin {
		a := serverplugin.NewAliasPlugin()
		a.Alias("Calc", "Times", "Arith", "Mul")
		a.Alias("Tally", "Bump", "Counter", "Inc")
		a.Alias("letters", "", "inbox", "")
		return a
	}

	ps := newPlainServer(t)
	ps.Plugins.Add(alias())
	pc := plainClient(t, serve(t, ps))
	var rPlain testsvc.Reply
	require.NoError(t, pc.Call(ctx, "Calc", "Times", &testsvc.Args{A: 6, B: 7}, &rPlain))
	assert.Equal(t, 42, rPlain.C)

	bs, bp := newServer(t)
	counterSvc := new(Counter)
	require.NoError(t, bs.RegisterName("Counter", counterSvc, ""))
	bs.Plugins.Add(alias())
	got := make(chan string, 1)
	require.NoError(t, bp.HandleSend("inbox", func(_ context.Context, b []byte) { got <- string(b) }))
	addr := serve(t, bs)
	c := newClient(t)
	waitConnected(t, c, addr)
	var rBatch testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Calc", "Times", &testsvc.Args{A: 6, B: 7}, &rBatch))
	assert.Equal(t, rPlain, rBatch)

	require.NoError(t, c.Cast(ctx, addr, "Tally", "Bump", &testsvc.Args{}))
	require.True(t, eventually(5*time.Second, func() bool { return counterSvc.n.Load() == 1 }), "aliased cast did not run")

	require.NoError(t, c.Send(ctx, addr, "letters", []byte("hello")))
	select {
	case b := <-got:
		assert.Equal(t, "hello", b)
	case <-ctx.Done():
		t.Fatal("aliased send was not delivered")
	}

	// An unaliased unknown name still fails with rpcx's text on both.
	errPlain := pc.Call(ctx, "Nope", "Times", &testsvc.Args{}, &rPlain)
	errBatch := c.Call(ctx, addr, "Nope", "Times", &testsvc.Args{}, &rBatch)
	require.Error(t, errPlain)
	require.Error(t, errBatch)
	assert.Equal(t, errPlain.Error(), errBatch.Error())
}

// ---- the counting plugin ----

// ridKey names the request metadata entry that tells requests apart.
const ridKey = "rid"

// preReadMark is what hookLog's PreReadRequest leaves in the context for
// the PostReadRequest of the same request.
type preReadMark struct{}

// hookLog implements every request hook rpcx has, the AuthFunc and a
// handler, and records, per request, which ran and in which order, with
// what each hook was shown.
type hookLog struct {
	mu        sync.Mutex
	seq       map[string][]string
	laneMsgs  atomic.Int64 // hooks shown a lane's frame or handshake
	preReads  atomic.Int64
	postReads atomic.Int64
}

func newHookLog() *hookLog { return &hookLog{seq: make(map[string][]string)} }

func (l *hookLog) add(rid, ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq[rid] = append(l.seq[rid], ev)
}

func ridOf(ctx context.Context) string {
	m, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	return m[ridKey]
}

// msg records ev for the request r, or notes a lane message.
func (l *hookLog) msg(r *protocol.Message, ev string) {
	if r.ServicePath == codec.ServicePath {
		l.laneMsgs.Add(1)
		return
	}
	if r.IsHeartbeat() {
		return
	}
	l.add(r.Metadata[ridKey], ev)
}

func describe(r *protocol.Message) string {
	return fmt.Sprintf("%s.%s type=%d oneway=%v st=%d status=%d payload=%x err=%q",
		r.ServicePath, r.ServiceMethod, r.MessageType(), r.IsOneway(), r.SerializeType(),
		r.MessageStatusType(), r.Payload, r.Metadata[protocol.ServiceError])
}

func (l *hookLog) PreReadRequest(ctx context.Context) error {
	l.preReads.Add(1)
	if sc, ok := ctx.(*share.Context); ok {
		sc.SetValue(preReadMark{}, true)
	}
	return nil
}

func (l *hookLog) PostReadRequest(ctx context.Context, r *protocol.Message, _ error) error {
	l.postReads.Add(1)
	if r.ServicePath == codec.ServicePath {
		l.laneMsgs.Add(1)
		return nil
	}
	if r.IsHeartbeat() {
		return nil
	}
	if ctx.Value(preReadMark{}) == true {
		l.add(r.Metadata[ridKey], "PreReadRequest")
	}
	l.add(r.Metadata[ridKey], "PostReadRequest "+describe(r))
	return nil
}

func (l *hookLog) PreHandleRequest(_ context.Context, r *protocol.Message) error {
	l.msg(r, "PreHandleRequest "+describe(r))
	return nil
}

func (l *hookLog) PreCall(ctx context.Context, sp, sm string, args any) (any, error) {
	l.add(ridOf(ctx), "PreCall "+sp+"."+sm)
	return args, nil
}

func (l *hookLog) PostCall(ctx context.Context, sp, sm string, _, reply any, err error) (any, error) {
	l.add(ridOf(ctx), fmt.Sprintf("PostCall %s.%s err=%v", sp, sm, err))
	return reply, nil
}

func (l *hookLog) PreWriteResponse(_ context.Context, req, res *protocol.Message, err error) error {
	if res == nil {
		l.msg(req, fmt.Sprintf("PreWriteResponse <nil> err=%v", err))
		return nil
	}
	l.msg(req, fmt.Sprintf("PreWriteResponse %s err=%v", describe(res), err))
	return nil
}

func (l *hookLog) PostWriteResponse(_ context.Context, req, res *protocol.Message, err error) error {
	l.msg(req, fmt.Sprintf("PostWriteResponse %s err=%v", describe(res), err))
	return nil
}

func (l *hookLog) auth(_ context.Context, r *protocol.Message, _ string) error {
	if r.ServicePath != codec.ServicePath { // a frame is authorised as a whole, and then per entry
		l.add(r.Metadata[ridKey], "AuthFunc "+r.ServicePath+"."+r.ServiceMethod)
	}
	if strings.HasSuffix(r.Metadata[ridKey], "denied") {
		return errors.New("denied by AuthFunc")
	}
	return nil
}

// Hooked is the service of the counting test: it records that the handler
// ran, for the request in its context.
type Hooked struct{ log *hookLog }

// Do records the handler and replies A*B.
func (h *Hooked) Do(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	h.log.add(ridOf(ctx), "handler")
	r.C = a.A * a.B
	return nil
}

// Fail records the handler and fails.
func (h *Hooked) Fail(ctx context.Context, _ *testsvc.Args, _ *testsvc.Reply) error {
	h.log.add(ridOf(ctx), "handler")
	return errors.New("failed on purpose")
}

func ridCtx(ctx context.Context, rid string) context.Context {
	return context.WithValue(ctx, share.ReqMetaDataKey, map[string]string{ridKey: rid})
}

// TestHookOrderSameAsPlain: a plugin implementing every request hook sees,
// for every batched call and cast, the same hooks in the same order
// relative to AuthFunc, PreCall, the handler and PostCall, shown the same
// request and response messages, as for the same plain rpcx request; it
// never sees a frame. Sends (batch only) get the hooks of a oneway request.
func TestHookOrderSameAsPlain(t *testing.T) {
	type req struct {
		rid, method string
		cast        bool
	}
	var reqs []req
	for i := 0; i < 8; i++ {
		reqs = append(reqs, req{rid: fmt.Sprintf("call-%d", i), method: "Do"})
	}
	reqs = append(reqs,
		req{rid: "fail", method: "Fail"},
		req{rid: "denied", method: "Do"},
		req{rid: "nomethod", method: "Nope"},
		req{rid: "cast-0", method: "Do", cast: true},
		req{rid: "cast-1", method: "Do", cast: true},
		req{rid: "cast-denied", method: "Do", cast: true},
	)
	// done reports whether the server has finished with every request: its
	// last hook has run.
	done := func(l *hookLog) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range reqs {
			s := l.seq[r.rid]
			if len(s) == 0 {
				return false
			}
			last := s[len(s)-1]
			if !strings.HasPrefix(last, "PostCall") && !strings.HasPrefix(last, "PostWriteResponse") &&
				!strings.HasPrefix(last, "PreWriteResponse <nil>") {
				return false
			}
		}
		return true
	}
	setup := func(s *server.Server) *hookLog {
		l := newHookLog()
		require.NoError(t, s.RegisterName("Hooked", &Hooked{log: l}, ""))
		s.Plugins.Add(l)
		s.AuthFunc = l.auth
		return l
	}
	ctx := ctxT(t, 10*time.Second)

	ps := server.NewServer()
	plainLog := setup(ps)
	pc := plainClient(t, serve(t, ps))
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A plain request that fails AuthFunc closes rpcx's connection:
			// give it a client of its own.
			cl := pc
			if strings.HasSuffix(r.rid, "denied") {
				cl = plainClient(t, pc.RemoteAddr())
			}
			if r.cast {
				_ = cl.Call(ridCtx(ctx, r.rid), "Hooked", r.method, &testsvc.Args{A: 2, B: 3}, nil)
				return
			}
			var rep testsvc.Reply
			_ = cl.Call(ridCtx(ctx, r.rid), "Hooked", r.method, &testsvc.Args{A: 2, B: 3}, &rep)
		}()
	}
	wg.Wait()
	require.True(t, eventually(5*time.Second, func() bool { return done(plainLog) }), "plain requests did not finish")

	bs, bp := newServer(t)
	batchLog := setup(bs)
	var sendRan atomic.Int64
	require.NoError(t, bp.HandleSend("inbox", func(ctx context.Context, _ []byte) {
		batchLog.add(ridOf(ctx), "handler")
		sendRan.Add(1)
	}))
	addr := serve(t, bs)
	c := newClient(t, batchclient.WithLanes(2))
	waitConnected(t, c, addr)
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.cast {
				_ = c.Cast(ridCtx(ctx, r.rid), addr, "Hooked", r.method, &testsvc.Args{A: 2, B: 3})
				return
			}
			var rep testsvc.Reply
			_ = c.Call(ridCtx(ctx, r.rid), addr, "Hooked", r.method, &testsvc.Args{A: 2, B: 3}, &rep)
		}()
	}
	wg.Wait()
	require.NoError(t, c.Send(ridCtx(ctx, "send-0"), addr, "inbox", []byte("payload")))
	require.True(t, eventually(5*time.Second, func() bool { return done(batchLog) && sendRan.Load() == 1 }),
		"batched requests did not finish")

	for _, r := range reqs {
		plainSeq, batchSeq := plainLog.seq[r.rid], batchLog.seq[r.rid]
		assert.Equal(t, plainSeq, batchSeq, "request %s", r.rid)
	}
	assert.Equal(t, []string{
		"PreReadRequest",
		fmt.Sprintf("PostReadRequest inbox. type=0 oneway=true st=%d status=0 payload=%x err=\"\"", protocol.MsgPack, "payload"),
		"AuthFunc inbox.",
		fmt.Sprintf("PreHandleRequest inbox. type=0 oneway=true st=%d status=0 payload=%x err=\"\"", protocol.MsgPack, "payload"),
		"handler",
	}, batchLog.seq["send-0"])
	for _, rid := range []string{"call-0", "fail", "denied", "nomethod", "cast-0", "cast-denied"} {
		t.Logf("plain and batch, %s: %q", rid, plainLog.seq[rid])
	}

	// No hook was ever shown a frame or a handshake; PreReadRequest ran
	// once per request, plus (on both paths) once per connection before
	// the read rpcx was waiting in, or the lane's handshake.
	assert.Zero(t, plainLog.laneMsgs.Load())
	assert.Zero(t, batchLog.laneMsgs.Load())
	extra := batchLog.preReads.Load() - batchLog.postReads.Load()
	assert.True(t, extra >= 0 && extra <= 2, "batch: %d PreReadRequest, %d PostReadRequest", batchLog.preReads.Load(), batchLog.postReads.Load())
	assert.Equal(t, int64(len(reqs)+1), batchLog.postReads.Load())
}

// refusingPlugin refuses, in PostReadRequest, the requests whose rid is
// "refuse", with an error of its own (not ErrReqReachLimit), and fails
// every PreHandleRequest.
type refusingPlugin struct{}

var errRefusedByPlugin = errors.New("refused by plugin")

func (refusingPlugin) PostReadRequest(_ context.Context, r *protocol.Message, _ error) error {
	if r.Metadata[ridKey] == "refuse" {
		return errRefusedByPlugin
	}
	return nil
}

func (refusingPlugin) PreHandleRequest(context.Context, *protocol.Message) error {
	return errors.New("PreHandleRequest error")
}

// TestHookErrorsAsPlain: rpcx v1.9.4 ignores a PreHandleRequest error (the
// request runs), and so does the batch path. A PostReadRequest error other
// than ErrReqReachLimit makes plain rpcx close the connection (every call
// on it fails); the batch path refuses only that entry, with the hook's
// error text, and the lane goes on.
func TestHookErrorsAsPlain(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	ps := newPlainServer(t)
	ps.Plugins.Add(refusingPlugin{})
	pc := plainClient(t, serve(t, ps))
	var r testsvc.Reply
	require.NoError(t, pc.Call(ridCtx(ctx, "ok"), "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	assert.Equal(t, 42, r.C)
	errPlain := pc.Call(ridCtx(ctx, "refuse"), "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r)
	require.Error(t, errPlain)
	t.Logf("plain rpcx, refused: %v", errPlain)

	bs, _ := newServer(t)
	bs.Plugins.Add(refusingPlugin{})
	addr := serve(t, bs)
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	require.NoError(t, c.Call(ridCtx(ctx, "ok"), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	assert.Equal(t, 42, r.C)
	errBatch := c.Call(ridCtx(ctx, "refuse"), addr, "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r)
	require.Error(t, errBatch)
	assert.Equal(t, errRefusedByPlugin.Error(), errBatch.Error())
	r = testsvc.Reply{}
	require.NoError(t, c.Call(ridCtx(ctx, "ok"), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	assert.Equal(t, 6, r.C)
	assert.Equal(t, batchclient.Connected, c.Info(addr).Status)
}

// replyChecker checks, in PostWriteResponse, that the response message
// carries the reply to its own request: Arith.Mul's product of the
// request's arguments.
type replyChecker struct {
	seen, wrong atomic.Int64
}

func (rc *replyChecker) PostWriteResponse(_ context.Context, req, res *protocol.Message, _ error) error {
	if req.ServicePath != "Arith" {
		return nil
	}
	rc.seen.Add(1)
	var a testsvc.Args
	var r testsvc.Reply
	codec := share.Codecs[res.SerializeType()]
	if codec == nil || codec.Decode(req.Payload, &a) != nil || codec.Decode(res.Payload, &r) != nil || r.C != a.A*a.B {
		rc.wrong.Add(1)
	}
	return nil
}

// TestWriteHooksSeeEachReply: under concurrent calls, the response message
// a PostWriteResponse hook gets holds that call's reply, intact after the
// reply was written (the reply buffers are recycled), on both paths.
func TestWriteHooksSeeEachReply(t *testing.T) {
	const n = 500
	ctx := ctxT(t, 20*time.Second)

	ps := newPlainServer(t)
	plainRC := new(replyChecker)
	ps.Plugins.Add(plainRC)
	pc := plainClient(t, serve(t, ps))
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		return pc.Call(ctx, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r)
	})

	bs, _ := newServer(t)
	batchRC := new(replyChecker)
	bs.Plugins.Add(batchRC)
	addr := serve(t, bs)
	c := newClient(t, batchclient.WithLanes(2))
	waitConnected(t, c, addr)
	concurrently(t, n, func(i int) error {
		var r testsvc.Reply
		if err := c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r); err != nil {
			return err
		}
		if r.C != 3*i {
			return fmt.Errorf("call %d: got %d", i, r.C)
		}
		return nil
	})
	require.True(t, eventually(5*time.Second, func() bool { return batchRC.seen.Load() == n }), "batch: %d of %d seen", batchRC.seen.Load(), n)
	assert.Equal(t, int64(n), plainRC.seen.Load())
	assert.Zero(t, plainRC.wrong.Load())
	assert.Zero(t, batchRC.wrong.Load())
}
