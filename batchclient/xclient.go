package batchclient

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"

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
