package batchclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
	"github.com/rpcxbatch/rpcxbatch/internal/resmeta"
)

// The call path: Go, Call, Cast and Send route an entry to a lane (or to
// the plain client) and submit it there.

// Go starts a call to addr and returns at once; the returned rpcx Call is
// sent on done (or on a new buffered channel when done is nil) when it
// completes. If ctx ends first, the call completes with ctx's error. Its
// errors are Call's.
func (c *Client) Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	return c.goCall(ctx, addr, servicePath, serviceMethod, args, reply, done, false, nil)
}

// goCall is Go; st says the call carries rpcx's server timeout
// (lane.Pending.ServerTimeout), as the drop-in XClient's calls do; resp,
// when not nil, receives what a reply on a lane carried
// (lane.Pending.Response).
func (c *Client) goCall(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call, st bool, resp *lane.Response) *client.Call {
	c.metrics.calls.Inc(1)
	c.idle.Touch()
	if done == nil {
		done = make(chan *client.Call, 10)
	} else if cap(done) == 0 {
		panic("rpcxbatch: Go: done channel is unbuffered")
	}
	call := &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args, Reply: reply, Done: done}
	if m, ok := ctx.Value(lane.ReqMetaKey).(map[string]string); ok {
		// A copy, as rpcx's Go makes: the caller's map stays its own.
		call.Metadata = lane.CopyMetadata(ctx, m)
	} else if deadline, ok := ctx.Deadline(); ok && st {
		// rpcx's XClient.Go puts the server timeout in a map made for
		// it, which becomes the call's Metadata; the lane writes it into
		// the entry itself (lane.Pending.ServerTimeout).
		call.Metadata = map[string]string{share.ServerTimeout: strconv.FormatInt(time.Until(deadline).Milliseconds(), 10)}
	}
again:
	l, pr, k, err := c.route(ctx, addr)
	if err != nil {
		call.Error = err
		plainconn.Deliver(call) // never blocks the caller, as rpcx's Call.done
		return call
	}
	if pr.pc != nil {
		if st {
			ctx = withServerTimeout(ctx)
		}
		// Encoded here, before Go returns, as on lanes: rpcx would encode
		// on a goroutine of its own, after the caller took args back.
		args, err := plainconn.PreEncode(c.opts.RPCX.SerializeType, args)
		if err != nil {
			pr.done()
			call.Error = err
			plainconn.Deliver(call)
			return call
		}
		plainGo(ctx, pr, call, args)
		return call
	}
	if err := ctx.Err(); err != nil {
		// An ended context: the server would refuse the entry unrun, and
		// the caller is told at once, not after a round trip that races
		// with the context's watch.
		call.Error = err
		plainconn.Deliver(call)
		return call
	}
	pc2 := &lane.Pending{Call: call, Keyed: k.keyed, KeyHash: k.hash, ServerTimeout: st, Response: resp}
	id, _, err := l.Submit(ctx, codec.KindCall, pc2, false)
	if errors.Is(err, lane.ErrRetired) {
		goto again // the lane left its pool since route picked it
	}
	if errors.Is(err, lane.ErrTooLarge) {
		// Too large for a frame: a plain rpcx request (oversize.go).
		c.goOversize(ctx, addr, call, st)
		return call
	}
	if errors.Is(err, lane.ErrFinished) {
		return call
	}
	if err != nil {
		call.Error = err
		plainconn.Deliver(call) // never blocks the caller, as rpcx's Call.done
		return call
	}
	if ctx.Done() != nil {
		// The context ends the wait; no goroutine runs until it fires, and
		// the watch is dropped when the call completes first.
		stop := context.AfterFunc(ctx, func() {
			if p := l.Claim(id); p != nil {
				c.metrics.errTimeout.Inc(1)
				l.Finish(p, ctx.Err())
			}
		})
		if !l.Watch(id, stop) {
			stop()
		}
	}
	return call
}

// Call calls servicePath.serviceMethod at addr and waits for the reply, the
// end of ctx, or the loss of the connection. A server-side error is
// returned as rpcx's client.ServiceError, as plain rpcx returns it. The
// client's own errors are this package's sentinels (ErrConnection,
// ErrPeerDown, ErrOverloaded, ErrDraining, ErrEncode, ErrDecode,
// ErrUnsupportedCodec, ErrStopped, ErrClosed), ctx's error when it ends
// first, and rpcx's client errors on a peer without the batch plugin.
func (c *Client) Call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any) error {
	return c.call(ctx, addr, servicePath, serviceMethod, args, reply, false, nil)
}

// call is Call; st says the call carries rpcx's server timeout
// (lane.Pending.ServerTimeout), as the drop-in XClient's calls do; resp,
// when not nil, receives what a reply on a lane carried
// (lane.Pending.Response).
func (c *Client) call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, st bool, resp *lane.Response) error {
	c.metrics.calls.Inc(1)
	c.idle.Touch()
again:
	l, pr, k, err := c.route(ctx, addr)
	if err != nil {
		return err
	}
	if pr.pc != nil {
		return c.callPlain(ctx, pr, st, servicePath, serviceMethod, args, reply)
	}
	if err := ctx.Err(); err != nil {
		// An ended context fails the call at once, unsent: the server
		// would refuse it unrun (its deadline passed), and the reply of
		// that refusal would race with the caller's select.
		return err
	}
	sc := getSyncCall()
	sc.pending.Keyed, sc.pending.KeyHash, sc.pending.ServerTimeout, sc.pending.Response = k.keyed, k.hash, st, resp
	call := &sc.call
	call.ServicePath, call.ServiceMethod, call.Args, call.Reply = servicePath, serviceMethod, args, reply
	// A context many calls share has one watch for them all (ctxwatch.go):
	// the call then waits on call.Done alone.
	done := ctx.Done()
	var w *ctxWatch
	if done != nil {
		if w = c.sharedWatch(ctx, done); w != nil {
			w.addLane(l)
			sc.pending.Group = w
		}
	}
	// The lane's writer encodes args: the caller waits anyway, and its
	// goroutine then never grows its stack for the codec (a deep stack that
	// the collector shrinks while the caller waits and the next call grows
	// again).
	id, e, err := l.Submit(ctx, codec.KindCall, &sc.pending, true)
	if errors.Is(err, lane.ErrFinished) {
		<-call.Done
		c.woken.Add(-1)
		err = call.Error
		putSyncCall(sc)
		return err
	}
	if err != nil {
		// Never registered, or claimed back by submit: nothing refers to
		// it.
		putSyncCall(sc)
		if errors.Is(err, lane.ErrRetired) {
			goto again // the lane left its pool since route picked it
		}
		return err
	}
	// A context that can never end (no Done channel) leaves the wait to
	// call.Done alone: no select; so does a shared context's watch (w),
	// which completes the call with ctx's error when ctx ends. A call
	// that registered after the watch walked its lane sees fired, and
	// claims itself back as the select would. Any other context selects:
	// a context.AfterFunc per call that completes it with ctx's error
	// costs more than the select, even for callers sharing one context
	// (its allocations, and the context's mutex taken twice per call where
	// the select locks the shared channel twice).
	switch {
	case done == nil:
		<-call.Done
	case w != nil:
		if w.fired.Load() && l.Claim(id) != nil {
			c.metrics.errTimeout.Inc(1)
			e.Withdraw()
			putSyncCall(sc)
			return ctx.Err()
		}
		<-call.Done
	default:
		select {
		case <-call.Done:
		case <-done:
			if l.Claim(id) != nil {
				c.metrics.errTimeout.Inc(1)
				e.Withdraw()
				putSyncCall(sc)
				return ctx.Err()
			}
			// The reply is being delivered right now: it came in time, so
			// take it as if Done had won the race.
			<-call.Done
		}
	}
	c.woken.Add(-1)
	if errors.Is(call.Error, lane.ErrTooLarge) {
		// Too large for a frame, and not sent: a plain rpcx request
		// (oversize.go).
		e.Withdraw()
		putSyncCall(sc)
		return c.callOversize(ctx, addr, servicePath, serviceMethod, args, reply, st)
	}
	err = c.callResult(ctx, sc, reply)
	if call.Error == nil || err == call.Error {
		// Not when callResult reported the caller's deadline instead of
		// the server's answer: as for a reply that never came, which is
		// what rpcx's caller sees when its context ends first.
		resmeta.Fill(ctx, call.ResMetadata, l.Conn())
	}
	// Before returning: the writer must be done with args.
	e.Withdraw()
	// Whoever completed the call claimed it first, so nothing refers to it.
	putSyncCall(sc)
	return err
}

// callResult is the outcome of a completed synchronous call: its error, or
// the reply decoded into reply when the reader left that to the caller.
// A function of its own so that Call's frame, which every waiting caller
// keeps on its stack, stays small.
//
//go:noinline
func (c *Client) callResult(ctx context.Context, sc *syncCall, reply any) error {
	err := sc.call.Error
	if err == nil && sc.pending.Undecoded {
		err = c.decodeOwn(sc, reply)
	}
	if err == nil {
		// The context is not read on success: with many callers it is
		// out of the cache by the time the reply comes.
		return nil
	}
	if deadline, ok := ctx.Deadline(); ctx.Err() != nil || ok && !time.Now().Before(deadline) {
		// The server gave up at the same deadline, maybe a moment before
		// the caller's own timer fired: report the caller's deadline, as
		// for a reply that never came (the reply value is left alone).
		err = context.DeadlineExceeded
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return err
	}
	if sc.pending.Undecoded && sc.call.Error != nil {
		// The reply the failed call's handler filled in, as rpcx's client
		// decodes it beside the error, a decode error ignored.
		_ = c.decodeOwn(sc, reply)
	}
	return err
}

// decodeOwn decodes the reply the reader left to the caller
// (Pending.Undecoded) into reply.
func (c *Client) decodeOwn(sc *syncCall, reply any) error {
	// raw is this call's own copy of the reply: the reply may keep it
	// (rpcx's ByteCodec does), and then the next call must not reuse it.
	err := lane.DecodeReply(nil, c.opts.SerializeType, sc.pending.Raw, reply, true)
	if fastcodec.MayAlias(c.opts.SerializeType) {
		sc.pending.Raw = nil
	}
	return err
}

// syncCall is what Call needs per call, pooled: Call owns it from submit
// until it has received from Done.
type syncCall struct {
	call    client.Call
	pending lane.Pending
	done    chan *client.Call
}

var syncCallPool = sync.Pool{New: func() any {
	sc := &syncCall{done: make(chan *client.Call, 1)}
	return sc
}}

func getSyncCall() *syncCall {
	sc := syncCallPool.Get().(*syncCall)
	sc.call.Done = sc.done
	sc.pending.Call = &sc.call
	sc.pending.DeferDecode = true
	return sc
}

func putSyncCall(sc *syncCall) {
	raw := sc.pending.Raw
	sc.call = client.Call{}
	sc.pending = lane.Pending{}
	if cap(raw) <= 64<<10 {
		sc.pending.Raw = raw[:0] // keep a modest buffer for the next reply
	}
	syncCallPool.Put(sc)
}

// Cast runs servicePath.serviceMethod at addr without waiting for, or
// getting, its result. It returns once the entry is queued (or with the
// queue's overflow error); on a plain peer it is an rpcx oneway call. Its
// errors are Call's but for server-side ones and ErrDecode.
func (c *Client) Cast(ctx context.Context, addr, servicePath, serviceMethod string, args any) error {
	return c.cast(ctx, addr, servicePath, serviceMethod, args, false)
}

// cast is Cast; st says the cast carries rpcx's server timeout
// (lane.Pending.ServerTimeout), as the drop-in XClient's Oneshot does.
func (c *Client) cast(ctx context.Context, addr, servicePath, serviceMethod string, args any, st bool) error {
	c.metrics.casts.Inc(1)
	c.idle.Touch()
again:
	l, pr, k, err := c.route(ctx, addr)
	if err != nil {
		return err
	}
	if pr.pc != nil {
		// An rpcx oneway call completes once it is written: rpcx writes
		// it on a goroutine of its own, whose outcome this waits for.
		return c.callPlain(ctx, pr, st, servicePath, serviceMethod, args, nil)
	}
	// The entry and its call in one allocation: the lane holds them until
	// the cast is written, after the caller has returned.
	cc := &castCall{call: client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args}}
	cc.pending = lane.Pending{Call: &cc.call, Keyed: k.keyed, KeyHash: k.hash, ServerTimeout: st}
	_, _, err = l.Submit(ctx, codec.KindCast, &cc.pending, false)
	if errors.Is(err, lane.ErrRetired) {
		goto again // the lane left its pool since route picked it
	}
	if errors.Is(err, lane.ErrTooLarge) {
		// Too large for a frame: a plain rpcx oneway request (oversize.go).
		return c.callOversize(ctx, addr, servicePath, serviceMethod, args, nil, st)
	}
	return err
}

// castCall is a cast's lane entry and the rpcx call it carries.
type castCall struct {
	pending lane.Pending
	call    client.Call
}

// Send delivers payload to the send handler registered under handler on
// the server at addr. Sends made with the same WithKey key arrive in the
// order they were made. Send returns once the entry is queued (payload is
// copied: the caller may reuse it); it fails with ErrNotBatchPeer when the
// server has no batch plugin, or when addr was stopped with Stop, with
// ErrTooLarge for a payload larger than a frame, and otherwise with
// Cast's errors.
func (c *Client) Send(ctx context.Context, addr, handler string, payload []byte) error {
	c.metrics.sends.Inc(1)
	c.idle.Touch()
again:
	l, pr, k, err := c.route(ctx, addr)
	if err != nil {
		return err
	}
	if pr.pc != nil {
		pr.done()
		if c.Info(addr).Status == NotConnected {
			return fmt.Errorf("%w: %s was stopped with Stop; Start it to send", ErrNotBatchPeer, addr)
		}
		return fmt.Errorf("%w: %s", ErrNotBatchPeer, addr)
	}
	_, _, err = l.Submit(ctx, codec.KindSend, &lane.Pending{Call: &client.Call{ServicePath: handler, Args: payload},
		Keyed: k.keyed, KeyHash: k.hash}, false)
	if errors.Is(err, lane.ErrRetired) {
		goto again // the lane left its pool since route picked it
	}
	return err
}
