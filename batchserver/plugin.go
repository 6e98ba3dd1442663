package batchserver

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/idlemem"
)

// SendHandler receives the payload of every send entry addressed to the name
// it was registered under. Sends from one lane (and so from one sender key)
// are delivered one after another in the order they were sent, on a
// goroutine the connection keeps for its sends: a slow handler delays the
// later sends of that lane (never its calls and casts), so hand long work
// to a goroutine of your own.
type SendHandler func(ctx context.Context, payload []byte)

// Plugin is the batch server plugin of one rpcx server.
type Plugin struct {
	s           *server.Server
	opts        Options
	incarnation uint64
	// rpcxDeadlines is set when rpcx sets a write deadline of its own
	// before each of its writes (server.WithWriteTimeout): the reply
	// writer then leaves its deadline in place (replywriter.go).
	rpcxDeadlines bool
	services      *serviceTable
	// router is rpcx's AddHandler table (handlers.go).
	router  handlerRouter
	metrics *serverMetrics

	sendMu sync.RWMutex // guards sends
	sends  map[string]SendHandler

	connMu sync.Mutex // guards conns
	conns  map[net.Conn]*conn

	// hooks stands between rpcx and the server's plugins (see hooks.go).
	hooks *hookContainer

	workers workers
	// release returns memory to the OS after the load (nil unless
	// WithIdleMemoryRelease).
	release *idlemem.Watch
	// tasks owns the connections' reply writers and send queues (owner.go).
	tasks tasks
	// janitor trims parked goroutines and sheds quiet connections'
	// buffers on the plugin's own clock (janitor.go).
	janitor janitor
	feeder  poolFeeder
	pinger  poolPinger

	// Graceful shutdown (see shutdown.go): rs is the rpcx server's state;
	// draining is set once its Shutdown has begun; armed once a service
	// was unregistered outside Shutdown (it costs frames only once
	// UnregisterAll ran, see holdWhileDraining); holding while the plugin counts
	// itself in rpcx's requests being handled (under holdMu).
	rs       rpcxShutdown
	draining atomic.Bool
	armed    atomic.Bool
	holdMu   sync.Mutex // guards holding
	holding  bool
	// made is when New made the plugin: the connections note times as
	// the time since (conn.untakenSince), on the monotonic clock.
	made time.Time
}

// New adds the batch plugin to s and returns it. With WithPoolSize(Disabled)
// it adds nothing and returns a plugin that leaves s plain. It fails with
// ErrInvalidOption for an option value it cannot use, and with
// ErrUnsupportedRPCX when s is not laid out as rpcx v1.9.4's.
//
// The options s was created with hold for batched entries as for plain
// requests: batched calls and casts run on the pool of server.WithPool or
// server.WithCustomPool (see WithHandlerPool), server.WithWriteTimeout
// bounds reply-frame writes (unless WithWriteTimeout is given here), and
// lanes learn server.WithReadTimeout in their handshake and write within
// it. Create the plugin after NewServer has applied them.
//
// New leaves rpcx's process-wide protocol.MaxMessageLength as it is: rpcx
// reads every message, batch frames included, and allocates what it
// declares up to that cap (unlimited by default), for plain requests and
// lanes alike. The plugin bounds what it decodes itself: a frame above
// MaxFrameBytes closes its connection before any of its entries is read.
// Set protocol.MaxMessageLength yourself to bound what rpcx allocates for
// a message, plain or batch.
func New(s *server.Server, opts ...Option) (*Plugin, error) {
	o, err := buildOptions(append(rpcxOptions(s), opts...))
	if err != nil {
		return nil, err
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("batchserver: drawing the server incarnation: %w", err)
	}
	p := &Plugin{
		s:           s,
		opts:        o,
		incarnation: binary.LittleEndian.Uint64(seed[:]) | 1,
		made:        time.Now(),
		metrics:     newServerMetrics(o.Registry),
		sends:       make(map[string]SendHandler),
		conns:       make(map[net.Conn]*conn),
		// rpcxDeadlines: see Plugin.
		rpcxDeadlines: serverWriteTimeout(s) > 0,
	}
	if o.PoolSize == Disabled {
		return p, nil
	}
	if err := checkServerFields(s); err != nil {
		return nil, err
	}
	p.pinger.p = p
	p.janitor.p = p
	p.workers.parked = p.janitor.arm
	p.registerGauges()
	if o.IdleMemoryRelease > 0 {
		p.release = idlemem.New(o.IdleMemoryRelease, p.workers.busy, func() { p.metrics.memoryReleases.Inc(1) })
	}
	p.usePool()
	if p.services, err = newServiceTable(s); err != nil {
		return nil, err
	}
	if p.rs, err = readRPCXShutdown(s); err != nil {
		return nil, err
	}
	s.RegisterOnShutdown(func(*server.Server) { p.Close() })
	s.AddHandler(codec.ServicePath, codec.MethodHandshake, p.handshake)
	s.AddHandler(codec.ServicePath, codec.MethodBatch, p.batch)
	p.router = newHandlerRouter(s)
	p.router.own = 2
	// Request hooks must see calls, not frames: from here on s.Plugins
	// skips lane messages and the plugin runs those hooks per entry.
	p.hooks = wrapPlugins(s)
	p.hooks.handshakeRead = p.handshakeRead
	p.hooks.frameRead = p.frameRead
	s.Plugins.Add(p)
	return p, nil
}

// Incarnation returns the id drawn when this plugin was created; clients see
// it in the handshake and in every reply frame.
func (p *Plugin) Incarnation() uint64 { return p.incarnation }

// Options returns the options in force, defaults filled in.
func (p *Plugin) Options() Options { return p.opts }

// Metrics returns the registry the plugin reports to.
func (p *Plugin) Metrics() metrics.Registry { return p.opts.Registry }

// HandleSend registers fn for send entries addressed to name. Sends to a
// name with no handler are dropped and counted in errors.unknown_send. A
// second handler for the same name fails with ErrSendHandlerExists.
func (p *Plugin) HandleSend(name string, fn SendHandler) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if _, ok := p.sends[name]; ok {
		return fmt.Errorf("%w: %q", ErrSendHandlerExists, name)
	}
	p.sends[name] = fn
	return nil
}

func (p *Plugin) sendHandler(name string) SendHandler {
	p.sendMu.RLock()
	defer p.sendMu.RUnlock()
	return p.sends[name]
}

// Register is rpcx's RegisterPlugin hook: rpcx calls it after it has added
// the service to its own table, so the next batched call reads it afresh.
func (p *Plugin) Register(name string, _ any, _ string) error {
	p.services.forget(name)
	return nil
}

// Unregister is rpcx's RegisterPlugin hook for removed services. rpcx's
// Shutdown calls it for every service before it stops reading: the plugin
// then begins to drain. Called outside Shutdown (UnregisterAll ahead of
// it), it readies the plugin for a Shutdown that will run no hook (see
// shutdown.go).
func (p *Plugin) Unregister(name string) error {
	p.services.forget(name)
	if p.rs.shuttingDown() {
		p.beginDrain()
	} else {
		p.armed.Store(true)
	}
	return nil
}

// RegisterFunction is rpcx's RegisterFunctionPlugin hook.
func (p *Plugin) RegisterFunction(serviceName, _ string, _ any, _ string) error {
	p.services.forget(serviceName)
	return nil
}

// HandleConnClose is rpcx's PostConnClosePlugin hook: it drops the
// connection's batch state.
func (p *Plugin) HandleConnClose(c net.Conn) bool {
	p.connMu.Lock()
	delete(p.conns, c)
	last := len(p.conns) == 0
	p.connMu.Unlock()
	if last {
		p.workers.release(false)
	}
	return true
}

// HeartbeatRequest is rpcx's HeartbeatPlugin hook. A lane sends a
// heartbeat only when it has heard nothing for a while, so its reply path
// has been quiet: the connection lets go of its reply buffers at once (see
// shed.go), as the janitor would at its next look. It moves no clock: the
// parked goroutines are trimmed on the plugin's own (janitor.go), never
// faster for clients that send many heartbeats.
func (p *Plugin) HeartbeatRequest(ctx context.Context, _ *protocol.Message) error {
	if nc, ok := ctx.Value(server.RemoteConnContextKey).(net.Conn); ok {
		p.connMu.Lock()
		c := p.conns[nc]
		p.connMu.Unlock()
		if c != nil {
			c.shed()
		}
	}
	return nil
}

// Close releases the goroutines the plugin keeps parked for reuse, and
// waits for the plugin's own goroutines: the connections' reply writers
// and send queues (each send queue until the sends it holds have run; do
// not call Close from a send handler), a user pool's feeder and pinger
// (which run while the plugin has connections) and a drain's watcher.
// Call entries still running finish on their own. Call it after
// Server.Close or Shutdown when the process goes on without the server.
func (p *Plugin) Close() error {
	p.janitor.stop()
	p.unregisterGauges()
	p.release.Stop()
	p.workers.release(true)
	p.tasks.wait()
	return nil
}

// conn returns the batch state of c, creating it when absent, or nil when
// c is closed. Only the handshake creates it (when rpcx reads it, with a
// user pool, see handshakeRead; otherwise in its handler), for the
// connection rpcx finally serves (plugins added after this one may wrap or
// refuse what was accepted), and HandleConnClose removes it.
//
// rpcx runs the handshake's handler on a goroutine of its own while its
// read loop goes on, and a client that closes right after its handshake
// makes that loop read EOF and run PostConnClose, often before the handler
// runs: state made then would never be removed. So the state is made only
// for a connection still marked a lane, under connMu, which
// HandleConnClose takes after the mark is gone (hookContainer's
// DoPostConnClose forgets the lane before it runs the hooks).
func (p *Plugin) conn(c net.Conn) *conn {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	st := p.conns[c]
	if m := p.hooks.mark(c); st == nil && m != nil {
		st = newConn(p, c, m)
		p.conns[c] = st
		p.janitor.arm()
	}
	return st
}

func (p *Plugin) handshake(ctx *server.Context) error {
	var st *conn
	if c, _ := ctx.Get(server.RemoteConnContextKey).(net.Conn); c != nil {
		if st = p.conn(c); st == nil {
			// Closed already: nobody reads an answer.
			return nil
		}
		// Reply frames stay within what this client reads.
		if v, err := strconv.Atoi(ctx.Metadata()[codec.MetaMaxFrame]); err == nil && v > 0 {
			st.maxReply.Store(int64(min(v, p.opts.MaxFrameBytes)))
		}
		st.laneWants(ctx)
	}
	p.advertiseReadTimeout(ctx)
	p.grantWindowBytes(ctx, st)
	p.keepLanesHeard()
	h := codec.Handshake{
		Version:       codec.Version,
		PoolSize:      p.opts.PoolSize,
		BatchCap:      p.opts.BatchCap,
		MaxFrameBytes: p.opts.MaxFrameBytes,
		Incarnation:   p.incarnation,
		Window:        p.opts.Window,
	}
	return ctx.Write(codec.AppendHandshake(nil, &h))
}

// batch receives one batch frame. rpcx runs it in a goroutine of its own, so
// frames of one connection may arrive here out of order; conn.deliver puts
// them back in the order the lane wrote them.
func (p *Plugin) batch(ctx *server.Context) error {
	c, _ := ctx.Get(server.RemoteConnContextKey).(net.Conn)
	if c == nil {
		return nil
	}
	// Look up, never create: state made here for a frame that rpcx handed
	// over after the connection closed would never be removed. A lane
	// always handshakes first, which creates the state; a frame without one
	// is a protocol violation.
	p.connMu.Lock()
	st := p.conns[c]
	p.connMu.Unlock()
	if st == nil {
		p.metrics.errMalformed.Inc(1)
		logf("rpcxbatch: closing connection from %s: a batch frame before the handshake", c.RemoteAddr())
		c.Close()
		return nil
	}
	// Only a frame read during Shutdown is marked (frameRead), and
	// Shutdown never ends for a server: a running server's frames skip
	// the context's lock and lookup.
	if p.rs.shuttingDown() && unrunMarked(ctx) {
		p.unrun(ctx, st)
		st.mark.unstarted.Add(-1)
		return nil
	}
	delivered := p.frame(ctx, st)
	// Counted as read until now (laneMark.unstarted): from here on its
	// entries are counted in flight (deliver), or its connection is
	// closed.
	st.mark.unstarted.Add(-1)
	if delivered {
		p.holdWhileDraining(st)
	}
	return nil
}

// frame decodes a frame read on st and delivers its entries; it reports
// false when the frame broke the protocol and st was failed.
func (p *Plugin) frame(ctx *server.Context, st *conn) bool {
	if len(ctx.Payload()) > p.opts.MaxFrameBytes {
		st.fail(fmt.Errorf("%w: %d bytes, cap %d", codec.ErrFrameTooLarge, len(ctx.Payload()), p.opts.MaxFrameBytes))
		return false
	}
	seq, entries, slab, err := decodeFrame(ctx.Payload(), p.opts.BatchCap)
	if err != nil {
		st.fail(err)
		return false
	}
	// Compressed entries (compress.go), inflated within the frame's cap;
	// the bytes they gain count against the lane's byte window.
	gained, err := codec.InflateEntries(entries, len(ctx.Payload()), p.opts.MaxFrameBytes)
	if err != nil {
		slab.release()
		st.fail(err)
		return false
	}
	p.metrics.frames.Inc(1)
	p.metrics.batchSize.Update(int64(len(entries)))
	arrived := frameArrived(ctx)
	p.release.Touch()
	st.deliver(seq, entries, slab, len(ctx.Payload())+gained, arrived)
	return true
}

// unrunMarked reports whether frameRead marked the frame of ctx not to
// run.
func unrunMarked(ctx *server.Context) bool {
	unrun, _ := ctx.Get(unrunKey{}).(bool)
	return unrun
}

// unrun answers a frame read too late in a Shutdown to run (frameRead):
// its entries do not run, and its calls are told so, through the
// connection's writer, with an error the client retries elsewhere. Casts
// and sends are dropped unrun, as a plain oneway request read then is
// lost with its connection. The lane gets a drain notice with it: a
// Shutdown that ran no Unregister hook may have sent it none.
func (p *Plugin) unrun(ctx *server.Context, st *conn) {
	st.noticeDrain()
	_, entries, err := codec.DecodeBatch(ctx.Payload(), p.opts.BatchCap)
	if err != nil {
		st.fail(err)
		return
	}
	p.metrics.errUnrun.Inc(int64(len(entries)))
	ids := make([]uint64, 0, len(entries))
	for i := range entries {
		if entries[i].Kind == codec.KindCall {
			ids = append(ids, entries[i].ID)
		}
	}
	st.queueUnrun(ids)
}

// frameArrived is when rpcx read the frame (it notes the moment in the
// request's context), keeping time.Now's monotonic reading: the entries'
// deadlines count from then, not from when rpcx's goroutine got to run.
func frameArrived(ctx *server.Context) time.Time {
	now := time.Now()
	if read, ok := ctx.Get(server.StartRequestContextKey).(int64); ok {
		if d := time.Duration(now.UnixNano() - read); d > 0 && d < time.Minute {
			return now.Add(-d)
		}
	}
	return now
}

// logf logs through rpcx's logger, so batch events land where the server's
// own events do.
func logf(format string, args ...any) { log.Warnf(format, args...) }
