package batchclient

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// The drop-in's own call path. rpcx's XClient spends more per call than
// the lanes do: two exclusive locks around selection and the cached-client
// lookup, a share.Context and a request metadata map made for every call
// with a deadline (for "__ServerTimeout"), closures around the selector,
// plugin calls; and the metadata map is then copied onto the lane and
// decoded again on the server. Where nothing can tell the difference the
// drop-in runs Call, Go and Oneshot itself, as rpcx's xClient.Call, Go and
// Oneshot do, step for step:
//
//   - the auth token and the server timeout go into the call's metadata as
//     rpcx puts them (into the caller's own map when it has one, which rpcx
//     changes too); without a map of the caller's the lane writes
//     "__ServerTimeout" straight into the frame, and the handler sees the
//     same metadata;
//   - the server is chosen by rpcx's own selector, under rpcx's own lock,
//     except for RandomSelect: uniformly from the same list, without a
//     lock (selectRandom);
//   - Failfast, Failtry and Failover retry as rpcx's loop does, removing
//     and redialling the connection as rpcx's removeClient and
//     getCachedClient do, except that the connect is waited for outside
//     rpcx's lock and within the caller's context: a server whose connect
//     hangs stalls no call to another server (rpcx v1.9.4 dials under
//     its XClient's lock), and a caller waits for it no longer than its
//     deadline.
//
// It runs only while the XClient has no plugins of the user's (rpcx's
// wrapCall would run PreCall and PostCall around each attempt), no
// selector of the user's (SetSelector), Option.Sticky unset, share.Trace
// off, every server of the discovery served over lanes, and for Call a
// fail mode other than Failbackup. Otherwise rpcx's XClient runs the call,
// and so it does when the selector chooses no server, or one not served
// over lanes (possible only while a new server list reaches rpcx's copy):
// before anything is sent. The one difference: should a retry under
// Failover choose a server not served over lanes (the discovery changed
// during the call), that attempt fails with client.ErrServerUnavailable,
// where rpcx would dial it.

// errXClientClosed is the error rpcx's getCachedClient returns once its
// XClient is closed, with rpcx's text.
var errXClientClosed = errors.New("this xclient is closed")

// nativeNow reports whether the next call may take the drop-in's own path.
func (x *xClient) nativeNow() bool {
	return x.native && !x.closed.Load() && !share.Trace && !x.userSelector.Load() &&
		x.disc.lanesOnly.Load() && ownPluginsOnly(x.userPlugins)
}

// ownPluginsOnly reports whether pc holds no plugin but the drop-in's own.
func ownPluginsOnly(pc client.PluginContainer) bool {
	if pc == nil {
		return true
	}
	for _, p := range pc.All() {
		if _, own := p.(skipDraining); !own {
			return false
		}
	}
	return true
}

// Call is rpcx's XClient.Call (see the top of this file for when the
// drop-in runs it itself).
//
// Its first attempt is made here, on a server served over lanes, and only
// a failed one goes on to failedFirst: Call's is then the one frame of the
// drop-in's that a waiting caller keeps on its stack. With 10,000 callers
// waiting, every frame between the caller and the lane is cold in the
// cache by the time the reply wakes it, and the three frames the loop had
// (Call, retry, attempt) cost 0.3 µs a call on the way back (the CPU
// profile's samples on their returns).
func (x *xClient) Call(ctx context.Context, serviceMethod string, args, reply any) error {
	ctx, k, c, st, err := x.firstAttempt(ctx, serviceMethod, args)
	rc, ok := c.(*rpcClient)
	if !ok || err != nil {
		return x.callWithout(ctx, k, c, st, err, serviceMethod, args, reply)
	}
	err = rc.bc.call(ctx, rc.addr, x.servicePath, serviceMethod, args, reply, st, nil)
	if err == nil {
		return nil
	}
	return x.failedFirst(ctx, st, k, rc, err, serviceMethod, args, reply)
}

// firstAttempt prepares Call's first attempt: the server rpcx's selector
// chooses (k), the call's metadata, and k's cached client c with
// cachedClient's error. k is "" when rpcx's XClient is to run the call:
// the native path may not run, or the selector chose no server on lanes.
// c is nil where rpcx's loop would make no attempt (Retries below 0).
//
//go:noinline
func (x *xClient) firstAttempt(ctx context.Context, serviceMethod string, args any) (_ context.Context, k string, c client.RPCClient, st bool, err error) {
	if x.failMode == client.Failbackup || !x.nativeNow() {
		return ctx, "", nil, false, nil
	}
	k, ch := x.selectKey(ctx, serviceMethod, args)
	if !x.onLanes(k) {
		return ctx, "", nil, false, nil
	}
	ctx, st = x.callMetadata(ctx)
	c, err = x.chosenClient(ctx, k, ch)
	if err == nil && x.failMode != client.Failfast && x.option.Retries < 0 {
		c = nil
	}
	return ctx, k, c, st, err
}

// callWithout is Call where firstAttempt found no client over lanes to
// attempt first: rpcx's XClient runs the call (k ""), or the connection
// failed (err), or c is a client of another kind, attempted through
// rpcx's interface.
//
//go:noinline
func (x *xClient) callWithout(ctx context.Context, k string, c client.RPCClient, st bool, err error, serviceMethod string, args, reply any) error {
	if k == "" {
		return x.XClient.Call(ctx, serviceMethod, args, reply)
	}
	if err != nil && (x.failMode == client.Failfast || contextCanceled(err)) {
		return err
	}
	if x.failMode == client.Failfast {
		err = x.attempt(ctx, st, c, serviceMethod, args, reply)
		if err != nil && uncoverError(err) {
			x.removeClient(k, c)
		}
		return err
	}
	return x.retry(ctx, st, k, c, err, serviceMethod, args, reply)
}

// failedFirst is Call after its first attempt, on rc, failed with err:
// Failfast drops the connection if the error is its own; Failtry and
// Failover go on with rpcx's loop.
//
//go:noinline
func (x *xClient) failedFirst(ctx context.Context, st bool, k string, rc *rpcClient, err error, serviceMethod string, args, reply any) error {
	if x.failMode == client.Failfast {
		if uncoverError(err) {
			x.removeClient(k, rc)
		}
		return err
	}
	if contextCanceled(err) || isServiceError(err) {
		return err
	}
	return x.retryAfter(ctx, st, k, rc, err, serviceMethod, args, reply)
}

// retry is rpcx's Failtry and Failover loop, from the first attempt on c
// (nil, with err, when there was no connection to the server chosen).
func (x *xClient) retry(ctx context.Context, st bool, k string, c client.RPCClient, err error, serviceMethod string, args, reply any) error {
	if x.option.Retries < 0 {
		return err
	}
	if c != nil {
		var done bool
		if done, err = x.tryOnce(ctx, st, c, serviceMethod, args, reply); done {
			return err
		}
	}
	return x.retryAfter(ctx, st, k, c, err, serviceMethod, args, reply)
}

// tryOnce is one attempt of rpcx's loop on c; done says the loop ends
// with err: a success, or the context's or the service's error, which
// rpcx does not retry.
func (x *xClient) tryOnce(ctx context.Context, st bool, c client.RPCClient, serviceMethod string, args, reply any) (done bool, err error) {
	err = x.attempt(ctx, st, c, serviceMethod, args, reply)
	return err == nil || contextCanceled(err) || isServiceError(err), err
}

// retryAfter is rpcx's loop after an attempt on c (or none, c nil) failed
// with err, neither the context's nor the service's: the connection is
// dropped if the error is its own, and the next attempts follow, Retries
// in all.
func (x *xClient) retryAfter(ctx context.Context, st bool, k string, c client.RPCClient, err error, serviceMethod string, args, reply any) error {
	var e error
	for retries := x.option.Retries; ; {
		if uncoverError(err) {
			x.removeClient(k, c)
		}
		if x.failMode == client.Failtry {
			c, e = x.cachedClient(ctx, k)
			time.Sleep(x.option.RetryInterval)
		} else {
			time.Sleep(x.option.RetryInterval)
			k, c, e = x.selectClient(ctx, serviceMethod, args)
		}
		if retries--; retries < 0 {
			break
		}
		if c != nil {
			var done bool
			if done, err = x.tryOnce(ctx, st, c, serviceMethod, args, reply); done {
				return err
			}
		}
	}
	if err == nil {
		err = e
	}
	return err
}

// attempt makes one try of a call on c.
func (x *xClient) attempt(ctx context.Context, st bool, c client.RPCClient, serviceMethod string, args, reply any) error {
	if rc, ok := c.(*rpcClient); ok {
		return rc.bc.call(ctx, rc.addr, x.servicePath, serviceMethod, args, reply, st, nil)
	}
	return c.Call(ctx, x.servicePath, serviceMethod, args, reply)
}

// Go is rpcx's XClient.Go (see the top of this file).
func (x *xClient) Go(ctx context.Context, serviceMethod string, args, reply any, done chan *client.Call) (*client.Call, error) {
	if !x.nativeNow() {
		return x.XClient.Go(ctx, serviceMethod, args, reply, done)
	}
	k, ch := x.selectKey(ctx, serviceMethod, args)
	if !x.onLanes(k) {
		return x.XClient.Go(ctx, serviceMethod, args, reply, done)
	}
	ctx, st := x.callMetadata(ctx)
	c, err := x.chosenClient(ctx, k, ch)
	if err != nil {
		return nil, err
	}
	if done == nil {
		done = make(chan *client.Call, 10)
	}
	rc, ok := c.(*rpcClient)
	if !ok {
		return c.Go(ctx, x.servicePath, serviceMethod, args, reply, done), nil
	}
	if reply == nil {
		// rpcx sends a call without a reply value as oneway (rpcClient.Go).
		call := &client.Call{ServicePath: x.servicePath, ServiceMethod: serviceMethod, Args: args, Done: done}
		if !rc.bc.ready(rc.addr) {
			// As Oneshot below.
			sctx, cancel := sendContext(ownMetadata(ctx), x.b.connectWait)
			go func() {
				defer cancel()
				call.Error = rc.bc.cast(sctx, rc.addr, x.servicePath, serviceMethod, args, st)
				plainconn.Deliver(call)
			}()
			return call, nil
		}
		call.Error = rc.bc.cast(ctx, rc.addr, x.servicePath, serviceMethod, args, st)
		plainconn.Deliver(call)
		return call, nil
	}
	return rc.bc.goCall(ctx, rc.addr, x.servicePath, serviceMethod, args, reply, done, st, nil), nil
}

// Oneshot is rpcx's XClient.Oneshot (see the top of this file): like
// rpcx's, it reports a failure to choose or reach a server, not the
// send's.
func (x *xClient) Oneshot(ctx context.Context, serviceMethod string, args any) error {
	if !x.nativeNow() {
		return x.XClient.Oneshot(ctx, serviceMethod, args)
	}
	k, ch := x.selectKey(ctx, serviceMethod, args)
	if !x.onLanes(k) {
		return x.XClient.Oneshot(ctx, serviceMethod, args)
	}
	ctx, st := x.callMetadata(ctx)
	c, err := x.chosenClient(ctx, k, ch)
	if err != nil {
		return err
	}
	if rc, ok := c.(*rpcClient); ok {
		if !rc.bc.ready(rc.addr) {
			// rpcx sends on a goroutine of its own, and returns once its
			// dial is done: the lane handshake is not waited for either,
			// and the caller's cancel once this returns does not stop the
			// send (sendContext).
			sctx, cancel := sendContext(ownMetadata(ctx), x.b.connectWait)
			go func() {
				defer cancel()
				_ = rc.bc.cast(sctx, rc.addr, x.servicePath, serviceMethod, args, st)
			}()
			return nil
		}
		_ = rc.bc.cast(ctx, rc.addr, x.servicePath, serviceMethod, args, st)
	} else {
		c.Go(ctx, x.servicePath, serviceMethod, args, nil, nil)
	}
	return nil
}

// callMetadata puts the auth token and the server timeout in the call's
// request metadata as rpcx's XClient does: into the caller's map, or a new
// one for the token. st reports that there is no map, and the lane is to
// write the server timeout (lane.Pending.ServerTimeout).
func (x *xClient) callMetadata(ctx context.Context) (_ context.Context, st bool) {
	m, _ := ctx.Value(lane.ReqMetaKey).(map[string]string)
	if token := x.auth.Load(); token != nil && *token != "" {
		if m == nil {
			m = map[string]string{}
			ctx = context.WithValue(ctx, share.ReqMetaDataKey, m)
		}
		m[share.AuthKey] = *token
	}
	if m == nil {
		return ctx, true
	}
	putServerTimeout(ctx, m)
	return ctx, false
}

// putServerTimeout writes the time ctx has left into m, as rpcx's
// setServerTimeout does, if ctx has a deadline.
func putServerTimeout(ctx context.Context, m map[string]string) {
	if deadline, ok := ctx.Deadline(); ok {
		m[share.ServerTimeout] = strconv.FormatInt(time.Until(deadline).Milliseconds(), 10)
	}
}

// withServerTimeout is rpcx's setServerTimeout, for a call the drop-in
// hands to a plain rpcx client: a context with a deadline carries
// "__ServerTimeout" in its request metadata, in a map made for it when it
// has none.
func withServerTimeout(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	m, _ := ctx.Value(lane.ReqMetaKey).(map[string]string)
	if m == nil {
		m = map[string]string{}
		ctx = context.WithValue(ctx, share.ReqMetaDataKey, m)
	}
	putServerTimeout(ctx, m)
	return ctx
}
