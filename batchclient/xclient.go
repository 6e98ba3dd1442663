package batchclient

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/follow"
	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
)

// connectSlack is what GenerateClient waits for a connect beyond
// DialTimeout: the time for the peer's manager to begin the attempt (it
// may be finishing a lane handshake of an attempt of its own).
const connectSlack = time.Second

// networkSeq numbers the rpcx network names the drop-in XClients register,
// one per XClient (rpcx keeps its client builders in a global table).
var networkSeq atomic.Uint64

// NewXClient is the drop-in for rpcx's client.NewXClient: the same
// arguments, plus batch options, and a value that satisfies client.XClient.
// Call, Go, Oneshot, Broadcast, Fork and Inform keep rpcx's selection, fail
// modes and discovery; what changes is the connection under each server:
// a lane pool where the server runs the batch plugin, plain rpcx where it
// does not (the handshake got rpcx's "can't find service", or the registry
// metadata says rpcxbatch=0). Only "tcp" servers use lanes; servers on
// other networks (quic, kcp, unix, ...) stay on plain rpcx.
//
// The XClient owns a Client built from FromRPCX(option) and opts (which
// override it); Close closes it. Use NewXClientWith to share one Client
// between several XClients.
//
// NewXClient panics when opts are invalid, as that is a programming error;
// the error is the one New would return.
func NewXClient(servicePath string, failMode client.FailMode, selectMode client.SelectMode, discovery client.ServiceDiscovery, option client.Option, opts ...Option) client.XClient {
	return newOwnedXClient(servicePath, failMode, selectMode, discovery, option, nil, opts)
}

// newOwnedXClient builds an XClient over a Client of its own, made from
// option and opts; ch is the bidirectional channel, or nil.
func newOwnedXClient(servicePath string, failMode client.FailMode, selectMode client.SelectMode, discovery client.ServiceDiscovery, option client.Option, ch chan<- *protocol.Message, opts []Option) client.XClient {
	bc, err := New(append([]Option{FromRPCX(option)}, opts...)...)
	if err != nil {
		panic(err)
	}
	xc := newXClientWith(bc, servicePath, failMode, selectMode, discovery, option, ch)
	xc.ownsClient = true
	return xc
}

// NewXClientWith is NewXClient over an existing Client, which the XClient
// does not close.
func NewXClientWith(bc *Client, servicePath string, failMode client.FailMode, selectMode client.SelectMode, discovery client.ServiceDiscovery, option client.Option) client.XClient {
	return newXClientWith(bc, servicePath, failMode, selectMode, discovery, option, nil)
}

// newXClientWith builds the XClient over bc; ch is the bidirectional
// channel, or nil.
func newXClientWith(bc *Client, servicePath string, failMode client.FailMode, selectMode client.SelectMode, discovery client.ServiceDiscovery, option client.Option, ch chan<- *protocol.Message) *xClient {
	network := fmt.Sprintf("rpcxbatch%d", networkSeq.Add(1))
	b := &builder{bc: bc, cache: make(map[string]client.RPCClient), genBreaker: option.GenBreaker,
		connectWait: bc.opts.DialTimeout + connectSlack, ch: ch}
	client.RegisterCacheClientBuilder(network, b)
	d := newBatchDiscovery(discovery, network, option.Group)
	var inner client.XClient
	if ch != nil {
		inner = client.NewBidirectionalXClient(servicePath, failMode, selectMode, d, option, ch)
	} else {
		inner = client.NewXClient(servicePath, failMode, selectMode, d, option)
	}
	x := &xClient{XClient: inner, bc: bc, disc: d, b: b, servicePath: servicePath, failMode: failMode, option: option}
	// The native path (xclient_native.go) reads rpcx's selector; without
	// it, or with a sticky server, every call goes through rpcx's XClient.
	x.layout, x.layoutRead = rpcxlayout.ReadXClient(inner)
	if !x.layoutRead {
		layoutWarning.Do(func() {
			// At rpcx's error level: its default logger drops warnings,
			// and this is to be seen.
			log.Errorf("rpcxbatch: cannot read rpcx's XClient (this rpcx is not laid out as v1.9.4): every call of a drop-in XClient takes rpcx's own, slower path (batchclient.OwnCallPath reports it)")
		})
	}
	x.native = x.layoutRead && !option.Sticky
	x.randomSelect = selectMode == client.RandomSelect
	b.plugins = x.GetPlugins
	// The user's plugins see the servers' keys as rpcx gives them
	// (selectkeys.go).
	x.SetPlugins(inner.GetPlugins())
	bc.conns.addBuilder(b)
	return x
}

// layoutWarning says, once per process, that rpcx's XClient could not be
// read.
var layoutWarning sync.Once

// OwnCallPath reports whether xc, made by NewXClient, NewXClientWith or
// NewBidirectionalXClient, runs Call, Go and Oneshot on the drop-in's own
// call path where nothing can tell it from rpcx's (see docs/client.md):
// false when this rpcx's XClient is not laid out as v1.9.4's, which the
// drop-in then cannot read, and every call takes rpcx's own, slower path
// (rpcx's logger says so once, at its error level, when the first such
// XClient is made), or when xc is not the drop-in's.
func OwnCallPath(xc client.XClient) bool {
	x, ok := xc.(*xClient)
	return ok && x.layoutRead
}

// xClient is rpcx's own XClient over a discovery that points its tcp
// servers at this package's RPCClient.
type xClient struct {
	client.XClient
	bc         *Client
	disc       *batchDiscovery
	b          *builder
	ownsClient bool
	// userPlugins is the container GetPlugins returns; rpcx's XClient has
	// it inside a keyedPlugins. userSelector is set by SetSelector
	// (selectkeys.go).
	userPlugins  client.PluginContainer
	userSelector atomic.Bool

	// The native call path (xclient_native.go): rpcx's selector and its
	// lock, whether the path may run at all, what rpcx's xClient was made
	// with, the token Auth set, and whether Close was called.
	layout rpcxlayout.XClient
	native bool
	// layoutRead says rpcxlayout could read rpcx's XClient (OwnCallPath).
	layoutRead bool
	// randomSelect says rpcx's selector is its random one (selectKey).
	randomSelect bool
	servicePath  string
	failMode     client.FailMode
	option       client.Option
	auth         atomic.Pointer[string]
	closed       atomic.Bool
}

// Auth sets the token rpcx puts in every call's metadata, and the token the
// lanes present in their handshakes and frames.
func (x *xClient) Auth(token string) {
	x.XClient.Auth(token)
	x.auth.Store(&token)
	x.bc.SetAuth(token)
}

// Close closes rpcx's XClient, stops following the discovery and, when the
// XClient made its own Client, closes it.
func (x *xClient) Close() error {
	x.closed.Store(true)
	err := x.XClient.Close()
	// rpcx's XClient closes the clients it cached, running their
	// ClientConnectionClose plugins; it leaves those a builder caches to
	// the builder.
	x.b.closeAll()
	x.bc.conns.removeBuilder(x.b)
	x.disc.stopForwarding()
	// rpcx keeps builders in a global table with no way to remove one:
	// empty ours so that all it holds after Close is its name.
	x.b.release()
	if x.ownsClient {
		// Its lanes' end reaches the channel as rpcx's lost-connection
		// message, as when rpcx's XClient closes its connections.
		x.bc.Close()
	}
	// Nothing more goes to the channel of a closed XClient.
	x.bc.push.dropXClient(x.b)
	return err
}

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

// rpcClient is the client.RPCClient rpcx's XClient sees for one server. It
// holds no connection of its own: the Client's pool for the address does,
// so closing it (rpcx does so after some errors) does not tear the pool
// down; the pool reconnects by itself.
type rpcClient struct {
	bc   *Client
	addr string
	// owner is the builder of the XClient this RPCClient serves: that
	// XClient's Close drops every server-message channel its RPCClients
	// registered.
	owner  *builder
	closed atomic.Bool

	// conn is the connection the RPCClient was made with (a lane's, or the
	// plain fallback's), which GetConn reports, as rpcx's Client reports
	// the connection it dialled for its whole life; viaLanes tells which.
	conn     net.Conn
	viaLanes bool
	// hookClose runs the ClientConnectionClose plugins once.
	hookClose sync.Once
	// hookSeq counts the calls whose messages the XClient's
	// ClientBeforeEncode and ClientAfterDecode plugins get (nextSeq).
	hookSeq atomic.Uint64
}

var _ client.RPCClient = (*rpcClient)(nil)

func (r *rpcClient) Connect(_, _ string) error { return r.bc.Start(r.addr) }

func (r *rpcClient) Go(ctx context.Context, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	if reply != nil {
		ctx = serverDeadline(ctx)
	}
	pc := r.owner.plugins()
	before, after := callHooks(pc)
	if reply == nil && before {
		ctx, args = r.beforeEncode(ctx, pc, r.nextSeq(), servicePath, serviceMethod, args, true)
	}
	if reply != nil && (before || after) {
		return r.hookedGo(ctx, pc, before, after, servicePath, serviceMethod, args, reply, done)
	}
	if reply == nil {
		// rpcx sends a call without a reply value as oneway (Oneshot).
		if done == nil {
			done = make(chan *client.Call, 1)
		}
		call := &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args, Done: done}
		if !r.bc.ready(r.addr) {
			// rpcx sends on a goroutine of its own: its caller does not
			// wait for the connection's first answer, nor does this one
			// for the lane handshake, nor may its context's cancel stop
			// the send (sendContext).
			sctx, cancel := sendContext(ownMetadata(ctx), r.owner.connectWait)
			go func() {
				defer cancel()
				call.Error = r.bc.Cast(sctx, r.addr, servicePath, serviceMethod, args)
				lane.Deliver(call)
			}()
			return call
		}
		call.Error = r.bc.Cast(ctx, r.addr, servicePath, serviceMethod, args)
		lane.Deliver(call) // never blocks the caller, as rpcx's Call.done
		return call
	}
	return r.bc.Go(ctx, r.addr, servicePath, serviceMethod, args, reply, done)
}

func (r *rpcClient) Call(ctx context.Context, servicePath, serviceMethod string, args, reply any) error {
	ctx = serverDeadline(ctx)
	// The XClient's ClientBeforeEncode and ClientAfterDecode plugins
	// (callhooks.go).
	if pc := r.owner.plugins(); pc != nil {
		if before, after := callHooks(pc); before || after {
			return r.hookedCall(ctx, pc, before, after, servicePath, serviceMethod, args, reply)
		}
	}
	return r.bc.Call(ctx, r.addr, servicePath, serviceMethod, args, reply)
}

// SendRaw has no batch form; it goes over the address's plain rpcx client.
func (r *rpcClient) SendRaw(ctx context.Context, m *protocol.Message) (map[string]string, []byte, error) {
	pr, err := r.bc.plainClient(ctx, r.addr)
	if err != nil {
		return nil, nil, err
	}
	defer pr.done()
	meta, payload, err := pr.pc.SendRaw(ctx, m)
	// The plain client's reader leaves ClientAfterDecode to the XClient
	// whose call it is (callhooks.go).
	if pc := r.owner.plugins(); pc != nil {
		if _, after := callHooks(pc); after {
			afterDecodeMessage(pc, m.SerializeType(), m.ServicePath, m.ServiceMethod, meta, payload, err)
		}
	}
	return meta, payload, err
}

// Close marks the RPCClient closed, so that rpcx's XClient makes another
// for the server, drops the server-message channel it registered, if no
// newer RPCClient has registered since (a closed rpcx client delivers
// nothing more either), and runs the ClientConnectionClose plugins, once.
// The lanes stay, as they are the Client's.
func (r *rpcClient) Close() error {
	r.closed.Store(true)
	r.bc.push.unregister(r.addr, r)
	r.connectionEnded()
	return nil
}

// connectionEnded runs the XClient's ClientConnectionClose plugins, once,
// as rpcx's Client runs them when it closes or its connection ends, and
// marks the RPCClient closing, so that rpcx makes another for its next
// call.
func (r *rpcClient) connectionEnded() {
	r.closed.Store(true)
	r.hookClose.Do(func() {
		r.bc.conns.removeClient(r.addr, r)
		if pc := r.owner.plugins(); pc != nil {
			_ = pc.DoClientConnectionClose(r.conn)
		}
	})
}

func (r *rpcClient) RemoteAddr() string { return r.addr }

// RegisterServerMessageChan makes ch receive the messages the server
// pushes on the lanes (or the plain connection) to this address; rpcx's
// XClient calls it with its bidirectional channel, nil for none. A nil ch
// clears only this RPCClient's own registration, as it clears only its own
// field on rpcx: an XClient without a channel over a shared Client leaves
// the Client's channel alone.
func (r *rpcClient) RegisterServerMessageChan(ch chan<- *protocol.Message) {
	if ch == nil {
		r.bc.push.unregister(r.addr, r)
		return
	}
	r.bc.push.register(r.addr, r, r.owner, ch)
}

// UnregisterServerMessageChan removes the channel this RPCClient
// registered for the address, as rpcx's clears its own field: a channel
// registered since, by a newer RPCClient of the same XClient (rpcx
// unregisters a client it removes even after it cached another for the
// server) or by anyone else, stays.
func (r *rpcClient) UnregisterServerMessageChan() { r.bc.push.unregister(r.addr, r) }

func (r *rpcClient) IsClosing() bool { return r.closed.Load() || r.bc.isClosed() }

func (r *rpcClient) IsShutdown() bool { return r.IsClosing() }

// GetConn returns the connection the RPCClient was made with (rpcx hands
// it to its ClientConnected plugins): a lane's, or the plain fallback's.
// It is never nil.
func (r *rpcClient) GetConn() net.Conn { return r.conn }

// batchDiscovery wraps the user's discovery: tcp servers are renamed into
// this XClient's network so rpcx builds them with the batch builder, unless
// their registry metadata says rpcxbatch=0.
type batchDiscovery struct {
	inner   client.ServiceDiscovery
	network string

	// names maps the keys of the last rewrite (selectkeys.go).
	names atomic.Pointer[keyNames]
	// lanesOnly says every server of the last rewrite is served over
	// lanes, and there was at least one (the native call path's
	// condition).
	lanesOnly atomic.Bool
	// group is the XClient's Option.Group; choosable is the last
	// rewrite's keys as rpcx's random selector holds them: filtered by
	// state and group as rpcx filters its server list (the native path
	// chooses among them without rpcx's lock, see selectKey).
	group     string
	choosable atomic.Pointer[[]choice]

	// mu guards watchers, the channels forward sends to, and the
	// forwarding goroutine's innerCh, stop and done, which
	// WatchService sets on first use and stopForwarding clears.
	mu       sync.Mutex
	watchers []chan []*client.KVPair
	innerCh  chan []*client.KVPair
	stop     chan struct{}
	done     chan struct{}
}

func newBatchDiscovery(inner client.ServiceDiscovery, network, group string) *batchDiscovery {
	return &batchDiscovery{inner: inner, network: network, group: group}
}

func (d *batchDiscovery) rewrite(pairs []*client.KVPair) []*client.KVPair {
	out := make([]*client.KVPair, 0, len(pairs))
	lanesOnly := len(pairs) > 0
	for _, p := range pairs {
		network, hostport, found := strings.Cut(p.Key, "@")
		if !found {
			network, hostport = "tcp", p.Key
		}
		if network != "tcp" || advertisedPlain(p.Value) {
			out = append(out, p)
			lanesOnly = false
			continue
		}
		out = append(out, &client.KVPair{Key: d.network + "@" + hostport, Value: p.Value})
	}
	d.recordNames(pairs, out)
	d.lanesOnly.Store(lanesOnly)
	d.choosable.Store(choosableKeys(out, d.group))
	return out
}

// choice is a server the native path's random choice may pick
// (selectRandom): its key and, once a call through it found one, the
// RPCClient over lanes that the builder caches for it, so that the calls
// after it look nothing up while that client stays open (chosenClient).
type choice struct {
	key string
	rc  atomic.Pointer[rpcClient]
}

// choosableKeys is the keys of pairs rpcx's XClient keeps in its server
// list, as choices: each once, less those filterByStateAndGroup drops
// (state=inactive, or not in group when group is set).
func choosableKeys(pairs []*client.KVPair, group string) *[]choice {
	var keys []string
	seen := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		if seen[p.Key] {
			continue
		}
		seen[p.Key] = true
		if v, err := url.ParseQuery(p.Value); err == nil {
			if v.Get("state") == "inactive" || group != "" && !slices.Contains(v["group"], group) {
				continue
			}
		}
		keys = append(keys, p.Key)
	}
	choices := make([]choice, len(keys))
	for i, k := range keys {
		choices[i].key = k
	}
	return &choices
}

func advertisedPlain(meta string) bool {
	v, err := url.ParseQuery(meta)
	return err == nil && v.Get(codec.MetaBatch) == "0"
}

func (d *batchDiscovery) GetServices() []*client.KVPair { return d.rewrite(d.inner.GetServices()) }

// WatchService returns a channel of rewritten server lists; the first call
// starts the goroutine that follows the inner discovery, which
// stopForwarding ends.
func (d *batchDiscovery) WatchService() chan []*client.KVPair {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop == nil {
		in := d.inner.WatchService()
		if in == nil {
			return nil // a static discovery: nothing to follow
		}
		d.innerCh, d.stop, d.done = in, make(chan struct{}), make(chan struct{})
		go d.forward(in, d.stop, d.done)
	}
	ch := make(chan []*client.KVPair, 10)
	d.watchers = append(d.watchers, ch)
	return ch
}

func (d *batchDiscovery) forward(in chan []*client.KVPair, stop, done chan struct{}) {
	defer close(done)
	follow.Follow(in, d.inner.GetServices, func(pairs []*client.KVPair) {
		pairs = d.rewrite(pairs)
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, w := range d.watchers {
			select {
			case w <- pairs:
			default:
				// A watcher 10 lists behind gets the current list with the
				// next one anyway.
			}
		}
	}, stop)
}

// RemoveWatcher stops sending to ch; rpcx closes ch itself afterwards.
func (d *batchDiscovery) RemoveWatcher(ch chan []*client.KVPair) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, w := range d.watchers {
		if w == ch {
			d.watchers = append(d.watchers[:i], d.watchers[i+1:]...)
			return
		}
	}
}

func (d *batchDiscovery) stopForwarding() {
	d.mu.Lock()
	stop, done, in := d.stop, d.done, d.innerCh
	d.stop, d.innerCh = nil, nil
	d.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
		d.inner.RemoveWatcher(in)
	}
}

// Clone clones the inner discovery for another service path.
func (d *batchDiscovery) Clone(servicePath string) (client.ServiceDiscovery, error) {
	in, err := d.inner.Clone(servicePath)
	if err != nil {
		return nil, err
	}
	return newBatchDiscovery(in, d.network, d.group), nil
}

func (d *batchDiscovery) SetFilter(f client.ServiceDiscoveryFilter) { d.inner.SetFilter(f) }

// Close closes the inner discovery, as rpcx's discoveries close theirs.
func (d *batchDiscovery) Close() {
	d.stopForwarding()
	d.inner.Close()
}
