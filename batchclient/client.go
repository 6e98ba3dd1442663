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
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
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
	rr      atomic.Uint64
	// keySeed hashes WithKey keys to lanes (maphash: faster than the
	// hand-written FNV-1a it replaced, 53-137 against 90-159 ns a key).
	keySeed maphash.Seed
	auth    atomic.Pointer[string] // token for handshakes and frames
	// woken counts callers of Call whose reply has been handed over and
	// who have not yet run to take it. Most will make their next call when
	// they do, so lane writers let them run before taking the queue (see
	// settle.Settle): frames then carry the calls of a whole reply frame's
	// callers instead of the first few. It spans every peer (a caller may
	// call any address next); settling stays bounded by settle.MaxYields.
	woken atomic.Int64

	// live mirrors peers for lock-free lookups on the call path; it is
	// written under mu.
	live sync.Map
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
}

// New returns a Client; it connects to an address on first use or Start.
func New(opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, metrics: newClientMetrics(o.Registry), keySeed: maphash.MakeSeed(),
		peers: make(map[string]*peer)}
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
		return lanes[0].conn
	}
	return nil
}

// Options returns the options in force, defaults filled in.
func (c *Client) Options() Options { return c.opts }

// Metrics returns the registry the client reports to.
func (c *Client) Metrics() metrics.Registry { return c.opts.Registry }

type keyCtx struct{}

// reqMetaKey is rpcx's request-metadata key as an interface value, made
// once: converting the string-typed key on every call allocates.
var reqMetaKey any = share.ReqMetaDataKey

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
	if p, ok := c.live.Load(addr); ok {
		return p.(*peer), nil
	}
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
	p := newPeer(c, addr, network, host)
	c.peers[addr] = p
	c.live.Store(addr, p)
	return p, nil
}

// Start connects to addr in the background if the client has no connection
// to it, and undoes Stop. Poll Info for the outcome.
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
	c.mu.Unlock()
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
	return nil
}

// route finds where an entry for addr goes: a lane, or a plain client
// (whose done the caller calls when the call is over).
func (c *Client) route(ctx context.Context, addr string) (*lane, plainRef, error) {
	key, hasKey := ctx.Value(keyCtx{}).(string)
	// errForgotten means the address changed hands while we looked (its
	// peer was forgotten, or it was started again): look again, a few times.
	for try := 0; ; try++ {
		p, err := c.peer(addr)
		if err != nil {
			return nil, plainRef{}, err
		}
		var l *lane
		var pr plainRef
		if p == nil {
			// Stopped: the plain path until Start.
			pr, err = c.stoppedPlain(ctx, addr)
		} else {
			l, pr, err = p.pick(ctx, key, hasKey)
		}
		if !errors.Is(err, errForgotten) || try == 3 {
			return l, pr, err
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
	}
}

// wokenCallers is woken as settle.Settle reads it.
func (c *Client) wokenCallers() int { return int(c.woken.Load()) }

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

// newEntry builds an entry and encodes args into it.
func (c *Client) newEntry(ctx context.Context, kind codec.Kind, path, method string, args any, est int) (*entry, error) {
	e := getEntry()
	var err error
	if est > maxKeptPayload {
		// Room for the bytes admission reserved: a large payload grown by
		// append would hold up to a quarter more than the queue counts.
		e.buf = make([]byte, 0, est)
	}
	if kind == codec.KindSend {
		// Copied: Send returns before the frame is written, and the caller
		// may reuse its buffer at once.
		b, _ := args.([]byte)
		e.buf = append(e.buf[:0], b...)
	} else {
		e.buf, err = encodeArgs(nil, e.buf[:0], c.opts.SerializeType, args)
	}
	if err != nil {
		putEntry(e)
		if errors.Is(err, fastcodec.ErrNoCodec) {
			return nil, ErrUnsupportedCodec
		}
		c.metrics.errCodec.Inc(1)
		return nil, err
	}
	e.Kind, e.ServicePath, e.ServiceMethod = kind, path, method
	e.SerializeType = uint8(c.opts.SerializeType)
	e.Payload = e.buf
	if m, ok := ctx.Value(reqMetaKey).(map[string]string); ok && len(m) > 0 {
		e.Metadata = copyMetadata(ctx, m)
	}
	e.deadline, _ = ctx.Deadline()
	e.size = codec.EntrySize(&e.Entry)
	return e, nil
}

// encodeArgs encodes args after dst: on the caller's goroutine for Go and
// Cast (with a nil fc), on the lane's writer for Call. A codec error or
// panic becomes ErrEncode, which fails that call alone.
func encodeArgs(fc *fastcodec.Codec, dst []byte, st protocol.SerializeType, args any) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, fmt.Errorf("%w: encoding the arguments panicked: %v", ErrEncode, r)
		}
	}()
	if fc != nil {
		out, err = fc.Append(dst, st, args)
	} else {
		out, err = fastcodec.Append(dst, st, args)
	}
	if err != nil && !errors.Is(err, fastcodec.ErrNoCodec) {
		err = fmt.Errorf("%w: %w", ErrEncode, err)
	}
	return out, err
}

// newDeferredEntry builds a call entry whose arguments the lane's writer
// encodes (see Call). It is kept apart from newEntry, and lean, because
// it runs on the caller's goroutine: the less stack a waiting caller
// needs, the less there is for the collector to shrink and the next call
// to grow back.
func (c *Client) newDeferredEntry(ctx context.Context, path, method string, args any) (*entry, error) {
	if share.Codecs[c.opts.SerializeType] == nil {
		return nil, ErrUnsupportedCodec
	}
	e := getEntry()
	e.deferred, e.args = true, args
	e.Kind, e.ServicePath, e.ServiceMethod = codec.KindCall, path, method
	e.SerializeType = uint8(c.opts.SerializeType)
	e.buf, e.Payload = e.buf[:0], nil
	if m, ok := ctx.Value(reqMetaKey).(map[string]string); ok && len(m) > 0 {
		e.Metadata = copyMetadata(ctx, m)
	}
	e.deadline, _ = ctx.Deadline()
	e.size = codec.EntrySize(&e.Entry)
	return e, nil
}

// copyMetadata copies the request metadata m found in ctx: rpcx's XClient
// writes the auth token into this map. A function of its own, off the
// common path: ranging over a map takes a large stack frame, and every
// caller's stack would grow for it.
//
//go:noinline
func copyMetadata(ctx context.Context, m map[string]string) map[string]string {
	if sc, ok := ctx.(*share.Context); ok {
		sc.Lock()
		defer sc.Unlock()
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Go starts a call to addr and returns at once; the returned rpcx Call is
// sent on done (or on a new buffered channel when done is nil) when it
// completes. If ctx ends first, the call completes with ctx's error.
func (c *Client) Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	c.metrics.calls.Inc(1)
	if done == nil {
		done = make(chan *client.Call, 10)
	} else if cap(done) == 0 {
		panic("rpcxbatch: Go: done channel is unbuffered")
	}
	call := &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args, Reply: reply, Done: done}
	if m, ok := ctx.Value(reqMetaKey).(map[string]string); ok {
		call.Metadata = m
	}
	l, pr, err := c.route(ctx, addr)
	if err != nil {
		call.Error = err
		call.Done <- call
		return call
	}
	if pr.pc != nil {
		go plainGo(ctx, pr, call)
		return call
	}
	pc2 := &pendingCall{call: call}
	id, _, err := c.submit(ctx, l, codec.KindCall, pc2, false)
	if errors.Is(err, errFinished) {
		return call
	}
	if err != nil {
		call.Error = err
		call.Done <- call
		return call
	}
	if ctx.Done() != nil {
		// The context ends the wait; no goroutine runs until it fires, and
		// the watch is dropped when the call completes first.
		stop := context.AfterFunc(ctx, func() {
			if p := l.claim(id); p != nil {
				c.metrics.errTimeout.Inc(1)
				l.finish(p, ctx.Err())
			}
		})
		if !l.pending.watch(id, stop) {
			stop()
		}
	}
	return call
}

// errFinished tells submit's caller that the lane completed the call
// itself (see lane.fail): its result is on its Done channel.
var errFinished = errors.New("rpcxbatch: call finished by its lane")

// submit queues one entry on l, encoding its arguments unless deferArgs;
// for calls it registers call and returns its id. A deferred entry is
// returned to its caller, who must withdraw it when the call is over.
func (c *Client) submit(ctx context.Context, l *lane, kind codec.Kind, pc *pendingCall, deferArgs bool) (uint64, *entry, error) {
	call := pc.call
	var id uint64
	size := 0 // the entry's size, once it has been encoded
	for {
		est, err := l.admit(size, ctx.Done(), ctx.Err)
		if err != nil {
			return 0, nil, c.unregistered(l, kind, id, err)
		}
		var e *entry
		if deferArgs {
			e, err = c.newDeferredEntry(ctx, call.ServicePath, call.ServiceMethod, call.Args)
		} else {
			// Sized as known (this entry before, or the last one queued),
			// not as the first guess (the whole queue).
			e, err = c.newEntry(ctx, kind, call.ServicePath, call.ServiceMethod, call.Args, min(est, max(size, int(l.lastSize.Load()))))
		}
		if err != nil {
			l.unreserve(est)
			return 0, nil, c.unregistered(l, kind, id, err)
		}
		if kind == codec.KindCall {
			if id == 0 {
				id = l.register(pc)
			}
			e.ID = id
		}
		// Once queued, e belongs to the lane's writer (a deferred one is
		// shared with the caller, see entry.argState).
		err = l.enqueue(e, est, ctx.Done(), ctx.Err)
		if errors.Is(err, errNoRoom) {
			// Its payload is not held while waiting (admit.go).
			size = e.size
			putEntry(e)
			if err = l.waitRoom(size, ctx.Done(), ctx.Err); err == nil {
				continue
			}
		} else if err != nil {
			putEntry(e)
		}
		if err != nil {
			return 0, nil, c.unregistered(l, kind, id, err)
		}
		if !deferArgs {
			e = nil
		}
		return id, e, nil
	}
}

// unregistered ends a call that failed before its entry was queued: its
// registration (id, when a call) is withdrawn, unless the lane's fail has
// completed the call already (with its cause): errFinished then.
func (c *Client) unregistered(l *lane, kind codec.Kind, id uint64, err error) error {
	if kind == codec.KindCall && id != 0 && l.claim(id) == nil {
		return errFinished
	}
	return err
}

// Call calls servicePath.serviceMethod at addr and waits for the reply, the
// end of ctx, or the loss of the connection. A server-side error is
// returned as rpcx's client.ServiceError, as plain rpcx returns it.
func (c *Client) Call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any) error {
	c.metrics.calls.Inc(1)
	l, pr, err := c.route(ctx, addr)
	if err != nil {
		return err
	}
	if pr.pc != nil {
		err := plainCall(ctx, pr.pc, servicePath, serviceMethod, args, reply)
		pr.done()
		return err
	}
	sc := getSyncCall()
	call := &sc.call
	call.ServicePath, call.ServiceMethod, call.Args, call.Reply = servicePath, serviceMethod, args, reply
	// The lane's writer encodes args: the caller waits anyway, and its
	// goroutine then never grows its stack for the codec (a deep stack that
	// the collector shrinks while the caller waits and the next call grows
	// again: with 10,000 callers, a sixth of the CPU).
	id, e, err := c.submit(ctx, l, codec.KindCall, &sc.pending, true)
	if errors.Is(err, errFinished) {
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
		return err
	}
	select {
	case <-call.Done:
	case <-ctx.Done():
		if l.claim(id) != nil {
			c.metrics.errTimeout.Inc(1)
			e.withdraw()
			putSyncCall(sc)
			return ctx.Err()
		}
		// The reply is being delivered right now: it came in time, so
		// take it as if Done had won the race.
		<-call.Done
	}
	c.woken.Add(-1)
	err = c.callResult(ctx, sc, reply)
	copyResMetadata(ctx, call.ResMetadata, l.conn)
	// Before returning: the writer must be done with args.
	e.withdraw()
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
	if err == nil && sc.pending.undecoded {
		// raw is this call's own copy of the reply: the reply may keep it
		// (rpcx's ByteCodec does), and then the next call must not reuse it.
		err = decodeReply(nil, c.opts.SerializeType, sc.pending.raw, reply, true)
		if fastcodec.MayAlias(c.opts.SerializeType) {
			sc.pending.raw = nil
		}
	}
	if deadline, ok := ctx.Deadline(); err != nil && (ctx.Err() != nil || ok && !time.Now().Before(deadline)) {
		// The server gave up at the same deadline, maybe a moment before
		// the caller's own timer fired: report the caller's deadline, as
		// for a reply that never came.
		err = context.DeadlineExceeded
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	return err
}

// plainCall is a call over the plain rpcx client. It waits on rpcx's Go
// rather than using its Call: in rpcx v1.9.4, Call races with its own send
// when the context ends mid-call (call reads the sequence number send is
// still writing).
func plainCall(ctx context.Context, pc *client.Client, servicePath, serviceMethod string, args, reply any) error {
	call := pc.Go(ctx, servicePath, serviceMethod, args, reply, make(chan *client.Call, 1))
	select {
	case <-call.Done:
		copyResMetadata(ctx, call.ResMetadata, pc.Conn)
		return call.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plainGo runs call over the plain rpcx client and completes it, as Go
// does on lanes: with the reply, or with ctx's error if ctx ends first.
// It runs on a goroutine of its own, which rpcx ends (a reply, or the
// connection closing) unless ctx does.
func plainGo(ctx context.Context, pr plainRef, call *client.Call) {
	defer pr.done()
	inner := pr.pc.Go(ctx, call.ServicePath, call.ServiceMethod, call.Args, call.Reply, make(chan *client.Call, 1))
	select {
	case <-inner.Done:
		call.Error, call.ResMetadata = inner.Error, inner.ResMetadata
	case <-ctx.Done():
		call.Error = ctx.Err()
	}
	deliver(call)
}

// syncCall is what Call needs per call, pooled: Call owns it from submit
// until it has received from Done.
type syncCall struct {
	call    client.Call
	pending pendingCall
	done    chan *client.Call
}

var syncCallPool = sync.Pool{New: func() any {
	sc := &syncCall{done: make(chan *client.Call, 1)}
	return sc
}}

func getSyncCall() *syncCall {
	sc := syncCallPool.Get().(*syncCall)
	sc.call.Done = sc.done
	sc.pending.call = &sc.call
	sc.pending.deferDecode = true
	return sc
}

func putSyncCall(sc *syncCall) {
	raw := sc.pending.raw
	sc.call = client.Call{}
	sc.pending = pendingCall{}
	if cap(raw) <= 64<<10 {
		sc.pending.raw = raw[:0] // keep a modest buffer for the next reply
	}
	syncCallPool.Put(sc)
}

// decodeReply decodes an encoded reply with the client's codec. A codec
// that panics on the server's bytes (a custom decoder, say) fails only
// this call.
// A caller decoding its own reply passes a nil fc. The reply never
// aliases raw, which the lane reuses, unless own says raw is the call's
// alone: then the reply may keep it (see fastcodec.MayAlias).
func decodeReply(fc *fastcodec.Codec, st protocol.SerializeType, raw []byte, reply any, own bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoding the reply panicked: %v", ErrDecode, r)
		}
	}()
	switch {
	case own:
		return fastcodec.DecodeShared(st, raw, reply)
	case fc != nil:
		return fc.Decode(st, raw, reply)
	}
	return fastcodec.Decode(st, raw, reply)
}

// Cast runs servicePath.serviceMethod at addr without waiting for, or
// getting, its result. It returns once the entry is queued (or with the
// queue's overflow error); on a plain peer it is an rpcx oneway call.
func (c *Client) Cast(ctx context.Context, addr, servicePath, serviceMethod string, args any) error {
	c.metrics.casts.Inc(1)
	l, pr, err := c.route(ctx, addr)
	if err != nil {
		return err
	}
	if pr.pc != nil {
		// An rpcx oneway call completes once it is written: rpcx writes
		// it on a goroutine of its own, whose outcome this waits for.
		err := plainCall(ctx, pr.pc, servicePath, serviceMethod, args, nil)
		pr.done()
		return err
	}
	_, _, err = c.submit(ctx, l, codec.KindCast, &pendingCall{call: &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args}}, false)
	return err
}

// Send delivers payload to the send handler registered under handler on
// the server at addr. Sends made with the same WithKey key arrive in the
// order they were made. Send returns once the entry is queued (payload is
// copied: the caller may reuse it); it fails with ErrNotBatchPeer when the
// server has no batch plugin, or when addr was stopped with Stop.
func (c *Client) Send(ctx context.Context, addr, handler string, payload []byte) error {
	c.metrics.sends.Inc(1)
	l, pr, err := c.route(ctx, addr)
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
	_, _, err = c.submit(ctx, l, codec.KindSend, &pendingCall{call: &client.Call{ServicePath: handler, Args: payload}}, false)
	return err
}
