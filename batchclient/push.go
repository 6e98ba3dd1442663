package batchclient

import (
	"bytes"
	"net"
	"sync"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Server push (rpcx's bidirectional mode). A handler pushes with
// Server.SendMessage on the connection its request came in on; on the batch
// path that is one lane, whose reader hands every server-pushed message
// that is not the plugin's own (reply frames and credits) to the channel
// registered for the lane's address. The rules are rpcx's (client/client.go,
// handleServerRequest): a full channel drops the message with rpcx's
// warning, unless the rpcx option's BidirectionalBlock is set, in which case
// the lane's reader waits for room (and the lane's replies wait with it, as
// a plain connection's do); a closed channel is unregistered with rpcx's
// error; with no channel, the option's NilCallServerMessageHandler gets it.
// When the lane pool of an address is lost, the channel gets one message of
// status Error whose metadata holds the cause and "server", as rpcx sends
// for a lost connection.

// pushSink is the channel registered for one address, and who registered
// it. rpcx gives every RPCClient a channel field of its own; here all the
// RPCClients of an address share its one registration, so it remembers
// its owner, the RPCClient (or the Client) that set it: only the owner
// clears it. rpcx's XClient unregisters and closes a client it removes
// even when it has already cached a newer client for the same server,
// which has registered the channel again.
type pushSink struct {
	owner any
	// xc is the builder of the XClient whose RPCClient registered, nil for
	// the Client's own registration: Close of that XClient drops it.
	xc *builder
	ch chan<- *protocol.Message
}

// pushTable holds the channels server-pushed messages go to, by address.
type pushTable struct {
	// mu guards sinks; readers (the lanes delivering pushes) take it
	// shared, registrations and removals exclusively.
	mu    sync.RWMutex
	sinks map[string]pushSink
}

// RegisterServerMessageChan makes ch receive the messages the server at
// addr pushes (rpcx's Server.SendMessage from a handler running a call of
// this client), exactly as rpcx's Client.RegisterServerMessageChan does for
// one connection; it replaces the channel registered for addr before.
// Register before the first call to addr: a plain rpcx connection (a
// server without the batch plugin) takes the channel registered when it is
// made.
func (c *Client) RegisterServerMessageChan(addr string, ch chan<- *protocol.Message) {
	if ch == nil {
		c.push.unregister(addr, c)
		return
	}
	c.push.register(addr, c, nil, ch)
}

// UnregisterServerMessageChan stops delivering the messages pushed by the
// server at addr to the channel RegisterServerMessageChan registered.
func (c *Client) UnregisterServerMessageChan(addr string) {
	c.push.unregister(addr, c)
}

// has reports whether a channel is registered for addr.
func (t *pushTable) has(addr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.sinks[addr]
	return ok
}

// register makes ch the channel of addr, on behalf of owner: an RPCClient
// of the XClient of builder xc or, with xc nil, the Client.
func (t *pushTable) register(addr string, owner any, xc *builder, ch chan<- *protocol.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sinks == nil {
		t.sinks = make(map[string]pushSink)
	}
	t.sinks[addr] = pushSink{owner: owner, xc: xc, ch: ch}
}

// unregister removes the channel of addr if owner registered it; one that
// someone else registered since stays.
func (t *pushTable) unregister(addr string, owner any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sinks[addr]; ok && s.owner == owner {
		delete(t.sinks, addr)
	}
}

// dropXClient removes every channel an RPCClient of the XClient of
// builder xc registered.
func (t *pushTable) dropXClient(xc *builder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, s := range t.sinks {
		if s.xc == xc {
			delete(t.sinks, addr)
		}
	}
}

func (t *pushTable) sink(addr string) pushSink {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.sinks[addr]
}

// newPlainClient makes the rpcx client of a server without the batch
// plugin, with the channel registered for addr: there rpcx's own mechanism
// delivers the server's pushes. The channel is set before the client
// connects, as its reader reads it unsynchronised.
func (c *Client) newPlainClient(addr string) *client.Client {
	pc := client.NewClient(c.opts.RPCX)
	// The connection hooks of the XClients over the Client (connhooks.go).
	pc.Plugins = plainPlugins{h: &c.conns, addr: addr}
	if s := c.push.sink(addr); s.ch != nil {
		pc.RegisterServerMessageChan(s.ch)
	}
	return pc
}

// pushed delivers a message the server at addr pushed on a lane (the
// lane's OnPush); a delivery that waits for room gives up when stop, the
// lane's death, closes.
func (c *Client) pushed(addr string, msg *codec.Message, stop <-chan struct{}) {
	s := c.push.sink(addr)
	handler := c.opts.RPCX.NilCallServerMessageHandler
	if s.ch == nil && handler == nil {
		return // rpcx drops it too
	}
	m, err := rpcxMessage(msg)
	if err != nil {
		log.Warnf("rpcxbatch: dropping a message pushed by %s: %v", addr, err)
		return
	}
	if s.ch == nil {
		handler(m)
		return
	}
	c.deliverPush(addr, s, m, c.opts.RPCX.BidirectionalBlock, stop)
}

// rpcxMessage turns msg (whose fields alias the lane's read buffer) into
// the *protocol.Message rpcx's own reader would have made of the same
// bytes: it is encoded again and decoded by rpcx.
func rpcxMessage(msg *codec.Message) (*protocol.Message, error) {
	h := msg.Header
	// The payload is already decompressed.
	h.SetCompressType(protocol.None)
	b := codec.AppendMessage(nil, &h, msg.ServicePath, msg.ServiceMethod, msg.Metadata, msg.Payload)
	m := protocol.NewMessage()
	if err := m.Decode(bytes.NewReader(b)); err != nil {
		return nil, err
	}
	// rpcx decodes the compress type as it was sent.
	m.SetCompressType(msg.Header.CompressType())
	return m, nil
}

// deliver hands m to s's channel by rpcx's rules. block is the option's
// BidirectionalBlock; a blocked delivery gives up when stop closes.
func (c *Client) deliverPush(addr string, s pushSink, m *protocol.Message, block bool, stop <-chan struct{}) {
	defer func() {
		if p := recover(); p != nil {
			log.Errorf("ServerMessageChan may be closed so client remove it. Please add it again if you want to handle server requests. error is %v", p)
			c.push.mu.Lock()
			if c.push.sinks[addr].ch == s.ch {
				delete(c.push.sinks, addr)
			}
			c.push.mu.Unlock()
		}
	}()
	if block {
		// The reader waits here and hears nothing meanwhile; the lane is
		// not taken for frozen, as the server's answers to the writer's
		// heartbeats lie unread on the socket (lane.heartbeat looks). A
		// peer that freezes meanwhile fails the lane, which ends the wait.
		select {
		case s.ch <- m:
		case <-stop:
		}
		return
	}
	select {
	case s.ch <- m:
	default:
		c.metrics.errPushDropped.Inc(1)
		log.Warnf("ServerMessageChan may be full so the server request %d has been dropped", m.Seq())
	}
}

// poolLost is the peers' pushLost hook: pushLost, and the failed lanes
// out of the shared-context watches (dropDeadLanes).
func (c *Client) poolLost(addr string, server net.Addr, cause error) {
	c.pushLost(addr, server, cause)
	c.dropDeadLanes()
}

// pushLost tells the channel of addr, if any, that its lane pool to server is
// gone, with the message rpcx sends when a connection is lost. It never
// waits: a pool is torn down on Close and Stop too, and nothing would read.
func (c *Client) pushLost(addr string, server net.Addr, cause error) {
	// The XClients' RPCClients over the pool see their connection end.
	c.conns.lost(addr, true, nil)
	s := c.push.sink(addr)
	if s.ch == nil {
		return
	}
	m := protocol.NewMessage()
	m.SetMessageType(protocol.Request)
	m.SetMessageStatusType(protocol.Error)
	m.Metadata = map[string]string{"server": server.String()}
	if cause != nil {
		m.Metadata[protocol.ServiceError] = cause.Error()
	}
	c.deliverPush(addr, s, m, false, nil)
}
