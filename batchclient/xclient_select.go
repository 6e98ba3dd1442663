package batchclient

import (
	"context"
	"math/rand/v2"
	"strings"

	"github.com/smallnest/rpcx/client"
)

// The drop-in's own call path (xclient_native.go) chooses a server and
// finds its RPCClient as rpcx's selectClient and getCachedClient do, with
// rpcx's selector and cache, and connects outside rpcx's lock.

// onLanes reports whether k is a key of this XClient's network ("" is
// not).
func (x *xClient) onLanes(k string) bool {
	return len(k) > len(x.disc.network) && k[len(x.disc.network)] == '@' && strings.HasPrefix(k, x.disc.network)
}

// selectKey asks rpcx's selector for a server, under rpcx's lock, again
// while it chooses one that is shutting down (skipDraining); "" when there
// is none, or no selector. For rpcx's random selector it chooses itself,
// and returns the server's choice too (selectRandom).
func (x *xClient) selectKey(ctx context.Context, serviceMethod string, args any) (string, *choice) {
	if x.randomSelect {
		return x.selectRandom()
	}
	// rpcx's other selectors keep state (round robin's position, weights)
	// that each Select changes, under rpcx's lock.
	x.layout.Mu.Lock()
	defer x.layout.Mu.Unlock()
	sel := x.layout.Selector()
	if sel == nil {
		return "", nil
	}
	k := sel.Select(ctx, x.servicePath, serviceMethod, args)
	skip := skipDraining{x.bc}
	for i := 0; i < maxRedraws && skip.draining(k); i++ {
		k = sel.Select(ctx, x.servicePath, serviceMethod, args)
	}
	return k, nil
}

// selectRandom is rpcx's random selector without its lock: a server
// chosen uniformly from the list rpcx's selector holds, kept by the
// discovery as it rewrites it (choosableKeys), again while it is shutting
// down. Shared by every caller, rpcx's lock was a quarter of what the
// drop-in's own path cost a call at 100 callers; the list may be newer
// than rpcx's by the moment rpcx's watch takes to apply a change.
func (x *xClient) selectRandom() (string, *choice) {
	cs := x.disc.choosable.Load()
	if cs == nil || len(*cs) == 0 {
		return "", nil
	}
	ch := pickChoice(*cs)
	skip := skipDraining{x.bc}
	for i := 0; i < maxRedraws && skip.draining(ch.key); i++ {
		ch = pickChoice(*cs)
	}
	return ch.key, ch
}

// pickChoice is a uniform choice from cs (not empty): the one server
// without a draw.
func pickChoice(cs []choice) *choice {
	if len(cs) == 1 {
		return &cs[0]
	}
	return &cs[rand.IntN(len(cs))]
}

// selectClient is rpcx's selectClient (Sticky unset).
func (x *xClient) selectClient(ctx context.Context, serviceMethod string, args any) (string, client.RPCClient, error) {
	k, ch := x.selectKey(ctx, serviceMethod, args)
	if k == "" {
		return "", nil, client.ErrXClientNoServer
	}
	c, err := x.chosenClient(ctx, k, ch)
	return k, c, err
}

// chosenClient is cachedClient for a key selectKey chose, through its
// choice when it has one: the client the last call through the choice
// found, while it is open (the builder caches no other for the key then:
// it replaces only a closing one), else cachedClient's, kept in the
// choice.
func (x *xClient) chosenClient(ctx context.Context, k string, ch *choice) (client.RPCClient, error) {
	if ch == nil {
		return x.cachedClient(ctx, k)
	}
	if rc := ch.rc.Load(); rc != nil && !rc.IsClosing() && !x.closed.Load() {
		return rc, nil
	}
	c, err := x.cachedClient(ctx, k)
	if rc, ok := c.(*rpcClient); ok && err == nil {
		ch.rc.Store(rc)
	}
	return c, err
}

// cachedClient is rpcx's getCachedClient for the key of a server served
// over lanes: the live RPCClient the builder caches, or a new one, cached
// under rpcx's lock, as rpcx makes it. The connect is waited for outside
// that lock and within ctx (see the top of this file); a wait the
// caller's context ends returns the context's error. rpcx keeps no
// breaker for such keys (the builder does). Its ClientConnected plugins
// are not run: the native path runs only without plugins of the user's.
func (x *xClient) cachedClient(ctx context.Context, k string) (client.RPCClient, error) {
	if x.closed.Load() {
		return nil, errXClientClosed
	}
	if !x.onLanes(k) {
		return nil, client.ErrServerUnavailable
	}
	if rc := x.b.live(k); rc != nil {
		return rc, nil // without rpcx's lock: the builder's copy of its cache
	}
	wait, callers := ctx, true
	if ctx.Err() != nil {
		// A call whose context had ended before it began: rpcx dials
		// for it all the same, and sends it, which a plain server runs.
		// So the connect is waited for whole, the lane handshake too, as
		// GenerateClient waits for the dial: the call then goes where
		// rpcx's would.
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(context.Background(), x.b.connectWait)
		defer cancel()
		callers = false
	}
	c, err := x.b.generate(wait, k, callers, !callers)
	if err != nil {
		return nil, err
	}
	x.layout.Mu.Lock()
	if cached := x.b.FindCachedClient(k, x.servicePath, ""); cached != nil {
		if !cached.IsClosing() && !cached.IsShutdown() {
			// Another caller's connect was cached meanwhile: use it, and
			// let this one go (its connection is the peer's, shared).
			x.layout.Mu.Unlock()
			c.Close()
			return cached, nil
		}
		x.b.DeleteCachedClient(cached, k, x.servicePath, "")
	}
	c.RegisterServerMessageChan(x.b.ch)
	x.b.SetCachedClient(c, k, x.servicePath, "")
	x.layout.Mu.Unlock()
	return c, nil
}

// removeClient is rpcx's removeClient (Sticky unset): k's cached RPCClient
// is dropped if it is still c, and c is closed.
func (x *xClient) removeClient(k string, c client.RPCClient) {
	x.layout.Mu.Lock()
	if cached := x.b.FindCachedClient(k, x.servicePath, ""); cached == c {
		x.b.DeleteCachedClient(c, k, x.servicePath, "")
	}
	x.layout.Mu.Unlock()
	if c != nil {
		c.UnregisterServerMessageChan()
		c.Close()
	}
}

// uncoverError is rpcx's: whether an error is the connection's, so that
// rpcx drops the connection (not a service error, not the context's).
func uncoverError(err error) bool {
	return !isServiceError(err) && err != context.DeadlineExceeded && err != context.Canceled
}

// contextCanceled is rpcx's: whether err is the context's, as it is.
func contextCanceled(err error) bool {
	return err == context.DeadlineExceeded || err == context.Canceled
}

// isServiceError is rpcx's test for an error the handler returned.
func isServiceError(err error) bool {
	e, ok := err.(client.ServiceError)
	return ok && e.IsServiceError()
}
