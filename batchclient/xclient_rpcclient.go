package batchclient

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// The RPCClient rpcx's XClient sees for one server: calls go to the
// Client's lanes to that server (or its plain fallback), and the
// connection hooks run as for rpcx's own Client.

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
				plainconn.Deliver(call)
			}()
			return call
		}
		call.Error = r.bc.Cast(ctx, r.addr, servicePath, serviceMethod, args)
		plainconn.Deliver(call) // never blocks the caller, as rpcx's Call.done
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
