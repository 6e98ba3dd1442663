package batchclient

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// The rpcx CacheClientBuilder of one drop-in XClient: how rpcx's XClient
// gets, caches and drops the RPCClient of each server (a connect of the
// server's peer, within the caller's context).

// builder is the rpcx CacheClientBuilder of one XClient's network name.
type builder struct {
	// mu guards bc, which release clears when the XClient closes, and
	// cache, rpcx's cached RPCClients by "network@address".
	mu    sync.Mutex
	bc    *Client
	cache map[string]client.RPCClient
	// lives is a copy of cache, replaced whole under mu at every change,
	// that the native call path reads without a lock (live).
	lives atomic.Pointer[map[string]*rpcClient]

	// plugins returns the XClient's plugin container (the user's), whose
	// hooks its RPCClients run.
	plugins func() client.PluginContainer
	// genBreaker is the XClient's Option.GenBreaker; breakers holds the
	// breaker of each server key, made on its first GenerateClient, as
	// rpcx's generateClient makes them.
	genBreaker func() client.Breaker
	breakers   sync.Map
	// connectWait bounds how long GenerateClient waits for a connect
	// attempt's outcome (the lanes' dial bound, and connectSlack).
	connectWait time.Duration
	// ch is the XClient's bidirectional channel, or nil.
	ch chan<- *protocol.Message
}

func (b *builder) SetCachedClient(c client.RPCClient, k, _, _ string) {
	b.mu.Lock()
	b.cache[k] = c
	b.publishLocked()
	b.mu.Unlock()
}

// publishLocked replaces lives with a copy of cache; b.mu is held.
func (b *builder) publishLocked() {
	m := make(map[string]*rpcClient, len(b.cache))
	for k, c := range b.cache {
		if rc, ok := c.(*rpcClient); ok {
			m[k] = rc
		}
	}
	b.lives.Store(&m)
}

// live returns the RPCClient cached for k, unless it is closing; nil if
// there is none.
func (b *builder) live(k string) *rpcClient {
	m := b.lives.Load()
	if m == nil {
		return nil
	}
	if rc := (*m)[k]; rc != nil && !rc.IsClosing() {
		return rc
	}
	return nil
}

func (b *builder) FindCachedClient(k, _, _ string) client.RPCClient {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cache[k]
}

func (b *builder) DeleteCachedClient(c client.RPCClient, k, _, _ string) {
	b.mu.Lock()
	if b.cache[k] == c {
		delete(b.cache, k)
		b.publishLocked()
	}
	b.mu.Unlock()
}

// GenerateClient is where rpcx's own XClient dials a server: the first
// call to it, and every retry after a call failed on a connection. The
// drop-in waits there for a connect attempt's outcome (a fresh one, see
// connectFresh), as long as rpcx's dial would take (the dial and TLS; the
// lane handshake is the calls' to wait for, each within its context), and
// fails as rpcx's dial fails, feeding the breaker of Option.GenBreaker as
// rpcx does; the RPCClient it returns carries the connection rpcx hands to
// its ClientConnected plugins.
func (b *builder) GenerateClient(k, _, _ string) (client.RPCClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.connectWait)
	defer cancel()
	return b.generate(ctx, k, false, false)
}

// generate is GenerateClient, waiting within ctx: the caller's context
// when callers is set (the drop-in's own call path), which then ends the
// wait with the context's error as rpcx's caller gets it, a failure of no
// connect. full waits for the lane handshake's outcome too.
func (b *builder) generate(ctx context.Context, k string, callers, full bool) (client.RPCClient, error) {
	_, hostport, _ := strings.Cut(k, "@")
	b.mu.Lock()
	bc := b.bc
	b.mu.Unlock()
	if bc == nil {
		return nil, ErrClosed
	}
	br := b.breaker(k)
	if br != nil && !br.Ready() {
		return nil, client.ErrBreakerOpen
	}
	rc := &rpcClient{bc: bc, addr: hostport, owner: b}
	if b.ch != nil {
		// rpcx registers the channel once this returns; a plain fallback
		// client dialled below takes the channel registered when it is made.
		bc.push.register(hostport, rc, b, b.ch)
	}
	fc, connectFailed, err := bc.connectFresh(ctx, hostport, full)
	if err != nil {
		bc.push.unregister(hostport, rc)
		if callers && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if connectFailed {
			if pc := b.plugins(); pc != nil {
				pc.DoConnCreateFailed("tcp", hostport)
			}
		}
		if br != nil {
			br.Fail()
		}
		return nil, err
	}
	rc.conn, rc.viaLanes = fc.conn, fc.viaLanes
	bc.conns.addClient(hostport, rc)
	return rc, nil
}

// sendContext is the context of a oneway send that Oneshot (or Go
// without a reply value) leaves to a goroutine while the lane handshake
// is under way: ctx's values and deadline, without its cancellation.
// rpcx's Oneshot returns once its dial is done and writes the request on
// a goroutine that never looks at the context again, so a caller that
// cancels its context as Oneshot returns (a deferred cancel) still has
// its request sent; so has the drop-in's. The wait for the connection
// ends at ctx's deadline, and at wait in any case (the connect's bound:
// a server that never answers the handshake does not keep the goroutine).
// The entry still carries ctx's deadline, not wait's.
func sendContext(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	bound := time.Now().Add(wait)
	if ok && deadline.Before(bound) {
		bound = deadline
	}
	inner, cancel := context.WithDeadline(context.WithoutCancel(ctx), bound)
	return detachedContext{Context: inner, deadline: deadline, ok: ok}, cancel
}

// detachedContext is sendContext's context: it ends at the bound of its
// wait, and reports the caller's deadline (or none) as its own.
type detachedContext struct {
	context.Context
	deadline time.Time
	ok       bool
}

// Deadline is the caller's deadline, which the entry carries.
func (c detachedContext) Deadline() (time.Time, bool) { return c.deadline, c.ok }

// serverDeadline is ctx as an entry made by rpcx's XClient is to carry
// it: a call rpcx's XClient hands an RPCClient carries "__ServerTimeout"
// in its request metadata wherever rpcx means the handler to have a
// deadline (setServerTimeout, for the caller's deadline); where the
// context has a deadline and the metadata no "__ServerTimeout", the
// deadline is one rpcx keeps on the client alone (the minute Broadcast,
// Fork and Inform add to a context without one), which rpcx's handler
// never sees. The entry then carries none either (clientDeadline), and
// the call still ends at it on the client.
func serverDeadline(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	if m, _ := ctx.Value(lane.ReqMetaKey).(map[string]string); m != nil {
		if _, ok := m[share.ServerTimeout]; ok {
			return ctx
		}
	}
	return clientDeadline{ctx}
}

// clientDeadline is a context whose deadline stays on the client: it ends
// when its parent does, and reports no deadline for an entry to carry.
type clientDeadline struct{ context.Context }

// Deadline reports none.
func (clientDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// ownMetadata is ctx with a copy of its request metadata map, if it has
// one, for a send made on a goroutine after the caller has its map back.
func ownMetadata(ctx context.Context) context.Context {
	if m, ok := ctx.Value(lane.ReqMetaKey).(map[string]string); ok {
		return context.WithValue(ctx, share.ReqMetaDataKey, lane.CopyMetadata(ctx, m))
	}
	return ctx
}

// breaker returns the breaker of server key k, made on first use, or nil
// without GenBreaker.
func (b *builder) breaker(k string) client.Breaker {
	if b.genBreaker == nil {
		return nil
	}
	if br, ok := b.breakers.Load(k); ok {
		return br.(client.Breaker)
	}
	br, _ := b.breakers.LoadOrStore(k, b.genBreaker())
	return br.(client.Breaker)
}

// closeAll closes the RPCClients the builder caches, as rpcx's XClient
// closes its own when it closes.
func (b *builder) closeAll() {
	b.mu.Lock()
	var rcs []client.RPCClient
	for _, rc := range b.cache {
		rcs = append(rcs, rc)
	}
	b.mu.Unlock()
	for _, rc := range rcs {
		rc.Close()
	}
}

// release drops what the builder holds once its XClient is closed.
func (b *builder) release() {
	b.mu.Lock()
	b.bc, b.cache = nil, map[string]client.RPCClient{}
	b.lives.Store(nil)
	b.mu.Unlock()
}
