package batchclient

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/internal/idlemem"
	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// Client sends calls, casts and sends to any number of servers, each over a
// pool of lanes when the server runs the batch plugin and over plain rpcx
// when it does not. Addresses are "host:port" (network tcp) or rpcx-style
// "network@host:port". A Client is safe for concurrent use; make one and
// share it.
type Client struct {
	opts    Options
	metrics *clientMetrics
	// idle is the WithIdleMemoryRelease watch, nil when it is off.
	idle *idlemem.Watch
	// keySeed hashes WithKey keys to lanes (maphash: faster than the
	// hand-written FNV-1a it replaced).
	keySeed maphash.Seed
	auth    atomic.Pointer[string] // token for handshakes and frames

	// rr and woken are written on every call, from both cores (woken by
	// the lanes' readers too), and live is read on every call: each
	// counter has a cache line of its own, so that its writes do not
	// evict what every call reads (they shared one line with live and
	// metrics before).
	_  [64]byte
	rr atomic.Uint64 // spreads keyless entries over a peer's lanes
	// lanesOpen counts the lanes open to every peer (the lanes.open gauge).
	lanesOpen atomic.Int64
	_         [56]byte
	// woken counts callers of Call whose reply has been handed over and
	// who have not yet run to take it. Most will make their next call when
	// they do, so lane writers let them run before taking the queue (see
	// settle.Settle): frames then carry the calls of a whole reply frame's
	// callers instead of the first few. It spans every peer (a caller may
	// call any address next); settling stays bounded by settle.MaxYields.
	woken atomic.Int64
	_     [56]byte
	// watches are the watches of shared contexts (ctxwatch.go), read on
	// every call with such a context; seenDone, written on a sampled few
	// of the others, is kept off their line.
	watches  [watchSlots]atomic.Pointer[ctxWatch]
	_        [64 - 8*watchSlots%64]byte
	seenDone atomic.Value // a <-chan struct{}
	_        [48]byte

	// live mirrors peers for lock-free lookups on the call path; it is
	// written under mu.
	live sync.Map
	// newest is the peer made last, while it is in live: most clients
	// call one address, whose peer it then is, and a look here (a load and
	// a string compare) costs a call a fraction of live's lookup, which
	// hashes the address. Written under mu only, when a peer is made or
	// leaves live, never by the calls that find it: the callers of many
	// addresses share a line they only read.
	newest atomic.Pointer[peer]
	// mu guards the address tables: peers, which addresses are in stopped,
	// and the writes to live and closed that keep them in step. It is
	// never held across a dial or a peer's shutdown; a peer's plain slot
	// lock may be held when it is taken (forgetPlain), never the other way
	// round.
	mu    sync.Mutex
	peers map[string]*peer
	// stopped holds a plain client slot per address stopped with Stop,
	// dialled on first use; its own lock is taken under mu.
	stopped *plainconn.Map
	closed  atomic.Bool // set under mu; read without it on the call path

	// push holds the channels of server-pushed messages (see push.go).
	push pushTable

	// drains holds the addresses whose server is shutting down (drain.go).
	drains drainSet

	// conns holds the XClients over the Client and their RPCClients, for
	// rpcx's connection plugin hooks (connhooks.go).
	conns connHooks
}

// New returns a Client; it connects to an address on first use or Start.
// An option value it cannot honour fails it with ErrInvalidOption.
func New(opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, metrics: newClientMetrics(o.Registry), idle: newIdleRelease(&o),
		keySeed: maphash.MakeSeed(), peers: make(map[string]*peer)}
	c.stopped = plainconn.NewMap(ErrClosed, c.stoppedSlotConfig)
	c.SetAuth(o.Auth)
	return c, nil
}

// SetAuth changes the token lanes present in handshakes and frames (the
// per-call token travels in each call's metadata, as with rpcx). Lanes
// already connected send it from their next frame on.
func (c *Client) SetAuth(token string) { c.auth.Store(&token) }

func (c *Client) authToken() string { return *c.auth.Load() }

func (c *Client) isClosed() bool { return c.closed.Load() }

// plainClient returns a plain rpcx client to addr, for what has no batch
// form (SendRaw); call done on the result when the call is over.
func (c *Client) plainClient(ctx context.Context, addr string) (plainRef, error) {
	for try := 0; ; try++ {
		p, err := c.peer(addr)
		if err != nil {
			return plainRef{}, err
		}
		var pr plainRef
		if p == nil {
			pr, err = c.stoppedPlain(ctx, addr)
		} else {
			p.lastUsed.Store(time.Now().UnixNano())
			pr, err = p.usePlain(ctx)
		}
		// errForgotten: the address changed hands while we looked.
		if !errors.Is(err, errForgotten) || try == 3 {
			return pr, err
		}
	}
}

// laneConn returns the connection of one lane to addr, or nil.
func (c *Client) laneConn(addr string) net.Conn {
	c.mu.Lock()
	p := c.peers[addr]
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	if lanes := p.view.Load().lanes; len(lanes) > 0 {
		return lanes[0].Conn()
	}
	return nil
}

// Options returns the options in force, defaults filled in.
func (c *Client) Options() Options { return c.opts }

// Metrics returns the registry the client reports to.
func (c *Client) Metrics() metrics.Registry { return c.opts.Registry }

type keyCtx struct{}

// WithKey returns a context whose entries are pinned to one lane chosen by
// key, so that every call, cast and send made with the same key to the same
// server arrives in the order it was made. Entries without a key are spread
// over the lanes.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

func splitAddr(addr string) (network, host string) {
	for i := 0; i < len(addr); i++ {
		if addr[i] == '@' {
			return addr[:i], addr[i+1:]
		}
	}
	return "tcp", addr
}

// peer returns the peer for addr, starting it on first use; nil when addr
// was stopped with Stop (the caller takes the plain path).
func (c *Client) peer(addr string) (*peer, error) {
	// The call path: a connected address is found without the lock.
	if p := c.newest.Load(); p != nil && p.key == addr {
		return p, nil
	}
	if p, ok := c.live.Load(addr); ok {
		return p.(*peer), nil
	}
	return c.addPeer(addr)
}

// addPeer is peer's path under the lock: the address's peer, made on
// first use. A function of its own, kept out of line: making a peer takes
// a large stack frame, which every caller's stack would otherwise grow
// for on every call (see Call).
//
//go:noinline
func (c *Client) addPeer(addr string) (*peer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if p := c.peers[addr]; p != nil {
		return p, nil
	}
	if c.stopped.Lookup(addr) != nil {
		return nil, nil
	}
	network, host := splitAddr(addr)
	p := newPeer(c.peerEnv(addr, network, host), addr, network, host)
	c.peers[addr] = p
	c.live.Store(addr, p)
	c.newest.Store(p)
	return p, nil
}

// Start connects to addr in the background if the client has no connection
// to it, and undoes Stop. Poll Info for the outcome. It fails with
// ErrClosed after Close.
func (c *Client) Start(addr string) error {
	c.stopped.Remove(addr)
	_, err := c.peer(addr)
	return err
}

// Stop tears down the connection to addr: lanes close, entries in flight
// fail with ErrStopped, and later calls to addr take the plain rpcx path
// until Start. Stop is idempotent.
func (c *Client) Stop(addr string) {
	c.mu.Lock()
	p := c.peers[addr]
	delete(c.peers, addr)
	c.live.Delete(addr)
	c.dropNewestLocked(p)
	c.stopped.Add(addr)
	c.mu.Unlock()
	if p != nil {
		p.shutdown()
	}
}

// Info reports the connection to addr.
func (c *Client) Info(addr string) Info {
	c.mu.Lock()
	p := c.peers[addr]
	c.mu.Unlock()
	if p == nil {
		return Info{Status: NotConnected}
	}
	return p.info()
}

// Close tears down every connection; calls in flight fail with an error
// that is both ErrClosed and ErrStopped (errors.Is), and later ones with
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	peers := c.peers
	c.peers = map[string]*peer{}
	c.closed.Store(true)
	c.live.Clear()
	c.newest.Store(nil)
	c.mu.Unlock()
	c.idle.Stop()
	c.stopped.Close()
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.shutdown()
		}()
	}
	wg.Wait()
	c.stopWatches()
	return nil
}

// entryKey is the WithKey key of an entry, hashed: the lane takes a keyed
// entry only while the key is its own (lane.Pending.Keyed).
type entryKey struct {
	keyed bool
	hash  uint64
}

// route finds where an entry for addr goes: a lane, or a plain client
// (whose done the caller calls when the call is over), and the entry's
// key.
func (c *Client) route(ctx context.Context, addr string) (*lane.Lane, plainRef, entryKey, error) {
	var k entryKey
	if key, ok := ctx.Value(keyCtx{}).(string); ok {
		k = entryKey{keyed: true, hash: maphash.String(c.keySeed, key)}
	}
	// errForgotten means the address changed hands while we looked (its
	// peer was forgotten, or it was started again): look again, a few times.
	for try := 0; ; try++ {
		p, err := c.peer(addr)
		if err != nil {
			return nil, plainRef{}, k, err
		}
		var l *lane.Lane
		var pr plainRef
		if p == nil {
			// Stopped: the plain path until Start.
			pr, err = c.stoppedPlain(ctx, addr)
		} else {
			l, pr, err = p.pick(ctx, k)
		}
		if !errors.Is(err, errForgotten) || try == 3 {
			return l, pr, k, err
		}
	}
}

// forget removes p from the table, if it is still the address's peer.
func (c *Client) forget(p *peer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers[p.key] == p {
		delete(c.peers, p.key)
		c.live.Delete(p.key)
		c.dropNewestLocked(p)
	}
}

// dropNewestLocked forgets p as the newest peer, if it is, as it leaves
// live; c.mu is held.
func (c *Client) dropNewestLocked(p *peer) {
	if p != nil && c.newest.Load() == p {
		c.newest.Store(nil)
	}
}

// stoppedPlain returns the plain rpcx client of a stopped address in use
// until its done, connecting it on first use or after it broke.
func (c *Client) stoppedPlain(ctx context.Context, addr string) (plainRef, error) {
	slot := c.stopped.Lookup(addr)
	if c.closed.Load() {
		return plainRef{}, ErrClosed
	}
	if slot == nil {
		return plainRef{}, fmt.Errorf("%w: %s was started again", errForgotten, addr)
	}
	u, err := slot.Use(ctx)
	return plainRef{pc: u.Client, use: u}, err
}

// stoppedSlotConfig is the plain client slot of the stopped address addr.
// A slot closed by Start or Close sends its callers back to route
// (errForgotten), which finds the new peer or ErrClosed.
func (c *Client) stoppedSlotConfig(addr string) plainconn.Config {
	network, host := splitAddr(addr)
	return plainconn.Config{
		Addr:    addr,
		Stopped: errForgotten,
		Dial: func(ctx context.Context) (*client.Client, error) {
			pc := c.newPlainClient(addr)
			return pc, plainconn.Connect(ctx, pc, c.opts.RPCX, network, host)
		},
	}
}

// callPlain is a call (reply not nil) or a cast (reply nil) over the plain
// rpcx client of pr, which it is done with when it returns: plainconn.Call,
// which waits on rpcx's Go within ctx, decodes the reply into a copy and
// fills the response metadata as rpcx's Call does. args are encoded first
// (plainconn.PreEncode), so that rpcx, which encodes on a goroutine of its
// own, never reads them once this has returned on ctx's end. st says the
// call carries rpcx's server timeout (withServerTimeout).
func (c *Client) callPlain(ctx context.Context, pr plainRef, st bool, servicePath, serviceMethod string, args, reply any) error {
	if st {
		ctx = withServerTimeout(ctx)
	}
	args, err := plainconn.PreEncode(c.opts.RPCX.SerializeType, args)
	if err == nil {
		err = plainconn.Call(ctx, pr.pc, servicePath, serviceMethod, args, reply, plainconn.FillResMeta)
	}
	pr.done()
	return err
}

// plainGo starts call over the plain rpcx client and completes it, as Go
// does on lanes: with the reply, or with ctx's error if ctx ends first.
// args are call's arguments encoded already (plainconn.PreEncode). rpcx's
// Go is started here, on the caller's goroutine: it copies the request
// metadata of ctx, which the caller may change once Go has returned, and
// does not block (it sends on a goroutine of its own). The wait runs on a
// goroutine of its own, which rpcx ends (a reply, or the connection
// closing) unless ctx does.
func plainGo(ctx context.Context, pr plainRef, call *client.Call, args any) {
	dst, commit := plainconn.ReplyCopy(ctx, call.Reply)
	inner := pr.pc.Go(ctx, call.ServicePath, call.ServiceMethod, args, dst, make(chan *client.Call, 1))
	go func() {
		defer pr.done()
		select {
		case <-inner.Done:
			if err := ctx.Err(); err != nil {
				call.Error = err // as in plainconn.Call: the context wins
				break
			}
			commit()
			call.Error, call.ResMetadata = inner.Error, inner.ResMetadata
		case <-ctx.Done():
			call.Error = ctx.Err()
		}
		plainconn.Deliver(call)
	}()
}
