package batchclient

import (
	"context"
	"net"
	"sync"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// rpcx's connection-level client plugin hooks on the drop-in XClient.
//
// On plain rpcx each XClient owns one rpcx Client per server, whose
// connection runs ConnCreated when it is made (ConnCreateFailed when that
// fails), ClientConnected when the XClient caches the client, and
// ClientConnectionClose once, when the client is closed or its connection
// ends. On the drop-in the connections are the Client's lanes (and its
// plain fallback clients), shared by the XClients over it; each XClient's
// per-server RPCClient plays the part of rpcx's Client. So:
//
//   - ConnCreated runs for every lane connection (after its handshake found
//     the batch plugin) and every plain fallback connection, with the
//     plugins of every XClient over the Client, each container's result
//     passed to the next; the lane uses the last connection returned.
//   - ConnCreateFailed runs when an XClient asks for a server (rpcx's
//     GenerateClient) and the connect attempt it waited for failed to
//     connect, with that XClient's plugins, as rpcx runs it when its dial
//     fails; and with every XClient's when a plain fallback dial fails.
//   - ClientConnected is rpcx's own call, with RPCClient.GetConn: the
//     connection the RPCClient was made for, never nil.
//   - ClientConnectionClose runs once per RPCClient, with that connection:
//     when rpcx closes it, when its XClient closes, or when its connection
//     (the lane pool, or the plain client's connection) ends.

// connHooks is a Client's table of the XClients over it (their builders,
// whose plugins the connection hooks run) and of their live RPCClients by
// address (told when their connection ends).
type connHooks struct {
	mu       sync.Mutex
	builders []*builder
	clients  map[string]map[*rpcClient]struct{}
	// adopted are the connections made for lanes that plain clients took
	// over (peer.adoptPlain), until they end: the RPCClients made with
	// one are the plain client's, not the lanes'.
	adopted map[net.Conn]struct{}
}

// plainAdopted records that a plain client of addr took over conn.
func (h *connHooks) plainAdopted(_ string, conn net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.adopted == nil {
		h.adopted = make(map[net.Conn]struct{})
	}
	h.adopted[conn] = struct{}{}
}

func (h *connHooks) addBuilder(b *builder) {
	h.mu.Lock()
	h.builders = append(h.builders, b)
	h.mu.Unlock()
}

func (h *connHooks) removeBuilder(b *builder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, o := range h.builders {
		if o == b {
			h.builders = append(h.builders[:i:i], h.builders[i+1:]...)
			return
		}
	}
}

// containers returns the plugin containers of the XClients over the
// Client, in the order they were made.
func (h *connHooks) containers() []client.PluginContainer {
	h.mu.Lock()
	bs := h.builders
	h.mu.Unlock()
	out := make([]client.PluginContainer, 0, len(bs))
	for _, b := range bs {
		if pc := b.plugins(); pc != nil {
			out = append(out, pc)
		}
	}
	return out
}

// created runs ConnCreated with every XClient's plugins (dial.Dialer's
// Created).
func (h *connHooks) created(conn net.Conn) (net.Conn, error) {
	var err error
	for _, pc := range h.containers() {
		if conn, err = pc.DoConnCreated(conn); err != nil {
			return conn, err
		}
	}
	return conn, nil
}

func (h *connHooks) createFailed(network, address string) {
	for _, pc := range h.containers() {
		pc.DoConnCreateFailed(network, address)
	}
}

func (h *connHooks) addClient(addr string, rc *rpcClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients == nil {
		h.clients = make(map[string]map[*rpcClient]struct{})
	}
	set := h.clients[addr]
	if set == nil {
		set = make(map[*rpcClient]struct{})
		h.clients[addr] = set
	}
	set[rc] = struct{}{}
}

func (h *connHooks) removeClient(addr string, rc *rpcClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := h.clients[addr]; set != nil {
		delete(set, rc)
		if len(set) == 0 {
			delete(h.clients, addr)
		}
	}
}

// lost tells the RPCClients of addr whose connection ended: those over
// the lanes when lanes is true (the pool is gone), else those made with
// conn (a plain client's connection).
func (h *connHooks) lost(addr string, lanes bool, conn net.Conn) {
	h.mu.Lock()
	var gone []*rpcClient
	for rc := range h.clients[addr] {
		_, adopted := h.adopted[rc.conn]
		if (lanes && rc.viaLanes && !adopted) || (!lanes && rc.conn == conn) {
			gone = append(gone, rc)
		}
	}
	if !lanes {
		delete(h.adopted, conn)
	}
	h.mu.Unlock()
	for _, rc := range gone {
		rc.connectionEnded()
	}
}

// plainPlugins is the plugin container of a plain fallback rpcx client:
// it runs the connection hooks of the XClients over the Client. The call
// hooks (ClientBeforeEncode, ClientAfterDecode) run in the XClient's
// RPCClient, for the XClient whose call it is, on lanes and plain alike;
// here they do nothing.
type plainPlugins struct {
	h    *connHooks
	addr string
	// adopted is the connection the client took over (adoptPlain), for
	// which ConnCreated has run already.
	adopted net.Conn
}

var _ client.PluginContainer = plainPlugins{}

func (p plainPlugins) Add(client.Plugin)    {}
func (p plainPlugins) Remove(client.Plugin) {}
func (p plainPlugins) All() []client.Plugin { return nil }
func (p plainPlugins) DoConnCreated(c net.Conn) (net.Conn, error) {
	if c == p.adopted {
		return c, nil
	}
	return p.h.created(c)
}
func (p plainPlugins) DoConnCreateFailed(network, address string) {
	p.h.createFailed(network, address)
}
func (p plainPlugins) DoClientConnected(c net.Conn) (net.Conn, error) { return c, nil }

// DoClientConnectionClose is rpcx's notice that the plain client closed
// or its connection ended: the RPCClients made with it are told.
func (p plainPlugins) DoClientConnectionClose(c net.Conn) error {
	p.h.lost(p.addr, false, c)
	return nil
}
func (p plainPlugins) DoPreCall(context.Context, string, string, any) error { return nil }
func (p plainPlugins) DoPostCall(context.Context, string, string, any, any, error) error {
	return nil
}
func (p plainPlugins) DoClientBeforeEncode(*protocol.Message) error { return nil }
func (p plainPlugins) DoClientAfterDecode(*protocol.Message) error  { return nil }
func (p plainPlugins) DoWrapSelect(fn client.SelectFunc) client.SelectFunc {
	return fn
}
