package batchserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/codec"

	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
)

// Handlers added with rpcx's Server.AddHandler(path, method, func(*Context)
// error). rpcx v1.9.4 looks a request up in that router before its
// services (processOneRequest) and hands the handler a *server.Context
// that writes the response to the connection itself. A batched entry has
// no connection of its own to write to, so its handler gets a Context over
// a connection that keeps what the handler writes (replyCapture): the
// first response written is the entry's reply, as the first response
// written is the one a plain client takes.

// ErrNoHandlerReply is the error a call gets when its AddHandler handler
// returned nil without writing a response. Over plain rpcx such a call
// waits until its context ends; make the handler call ctx.Write or
// ctx.WriteError (or return an error).
var ErrNoHandlerReply = errors.New("batchserver: AddHandler handler returned without writing a response")

// handlerRouter reads rpcx's router, the map AddHandler writes. It holds
// the map itself: rpcx makes it in NewServer and only adds to it, so the
// value read once is the one AddHandler keeps writing to. rpcx reads it
// without a lock on every request, and so does this.
type handlerRouter struct {
	m map[string]server.Handler
	// own is the number of the plugin's own handlers (handshake and
	// batch): a router holding no more has no user handler, and the entry
	// skips building the key.
	own int
}

func newHandlerRouter(s *server.Server) handlerRouter {
	m, _ := rpcxlayout.Router(s)
	return handlerRouter{m: m}
}

// lookup returns the handler added for service.method, or nil. The
// plugin's own service is not a batched entry's to call.
func (r handlerRouter) lookup(service, method string) server.Handler {
	if len(r.m) <= r.own || service == codec.ServicePath {
		return nil
	}
	return r.m[service+"."+method]
}

// runHandler runs an AddHandler handler for one call or cast, as rpcx's
// processOneRequest does for a plain request (no PreCall or PostCall
// plugins: rpcx runs none for a handler), and returns the reply it wrote,
// appended to dst, with the response metadata going to the entry's. The
// reply goes out without the write hooks: rpcx's handler writes its
// response to the connection itself. A handler's error goes to the
// server's HandleServiceError (or is logged at ERROR) and becomes the
// reply when the handler wrote none, as rpcx writes it with WriteError.
func (p *Plugin) runHandler(ec *entryCtx, e *codec.Entry, h server.Handler, dst []byte) ([]byte, error) {
	ec.direct = true
	req := requestMessage(ec, e)
	req.Metadata = ec.metadata(&ec.reqMeta)
	rc := &replyCapture{Conn: ec.conn}
	// async false: the handler's Write returns once the response is kept,
	// so the reply is known when the handler returns.
	sctx := server.NewContext(ec.shareContext(), rc, req, false)
	if err := h(sctx); err != nil {
		if hse := p.s.HandleServiceError; hse != nil {
			hse(err)
		} else {
			log.Errorf("[handler internal error]: servicepath: %s, servicemethod: %s, err: %v", e.ServicePath, e.ServiceMethod, err)
		}
		_ = sctx.WriteError(err)
	}
	if e.Kind != codec.KindCall {
		return nil, nil
	}
	res := rc.response()
	if res == nil {
		return nil, ErrNoHandlerReply
	}
	ec.addResponseMetadata(res.Metadata)
	if res.MessageStatusType() == protocol.Error {
		return nil, errors.New(res.Metadata[protocol.ServiceError])
	}
	return append(dst, res.Payload...), nil
}

// replyCapture is the connection an AddHandler handler writes its response
// to on the batch path: the lane's connection for everything a handler may
// read from it (its addresses), and a keeper of the first message written.
type replyCapture struct {
	net.Conn
	mu    sync.Mutex
	first *protocol.Message
	err   error
}

// Write keeps the first whole rpcx message written; later ones are
// dropped, as a plain client drops a second response to one request.
func (c *replyCapture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first != nil || c.err != nil {
		return len(b), nil
	}
	m := protocol.NewMessage()
	if err := m.Decode(bufio.NewReader(bytes.NewReader(b))); err != nil {
		c.err = fmt.Errorf("batchserver: AddHandler handler wrote something that is not an rpcx message: %w", err)
		return 0, c.err
	}
	c.first = m
	return len(b), nil
}

func (c *replyCapture) response() *protocol.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}
