package group

import (
	"context"
	"sync"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/selector"
)

// Caller is the transport a Group calls remote nodes through, by address.
// *batchclient.Client satisfies it (lanes to batch servers, plain rpcx to
// the others, so one list may mix both); PlainCaller is the plain-rpcx one.
// The Group hands it arguments the Group owns (see Group), so a Caller may
// read them after Call or Cast returned. A Caller that also has a method
// SerializeType() protocol.SerializeType tells the Group which rpcx codec
// to copy arguments with; without it the Group uses msgpack.
type Caller interface {
	// Call runs service.method at addr and waits for its reply. A
	// server-side error must come back as an rpcx client.ServiceError;
	// any other error means the node gave no answer.
	Call(ctx context.Context, addr, service, method string, args, reply any) error
	// Cast runs service.method at addr without a reply.
	Cast(ctx context.Context, addr, service, method string, args any) error
}

// PlainCaller is a Caller over plain rpcx: one *client.Client per address,
// connected on first use and reconnected after it broke. Addresses are
// "host:port" (tcp) or rpcx's "network@host:port". It is safe for
// concurrent use; Close it when done.
type PlainCaller struct {
	opt client.Option

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*plainConn
	closed bool
}

type plainConn struct {
	mu sync.Mutex // guards c; held while connecting, so one caller dials
	c  *client.Client
}

var _ Caller = (*PlainCaller)(nil)

// NewPlainCaller returns a PlainCaller whose clients use opt (for example
// client.DefaultOption).
func NewPlainCaller(opt client.Option) *PlainCaller {
	return &PlainCaller{opt: opt, conns: make(map[string]*plainConn)}
}

// conn returns a connected client for addr.
func (p *PlainCaller) conn(addr string) (*client.Client, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, client.ErrShutdown
	}
	pc := p.conns[addr]
	if pc == nil {
		pc = &plainConn{}
		p.conns[addr] = pc
	}
	p.mu.Unlock()

	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.c != nil && !pc.c.IsShutdown() && !pc.c.IsClosing() {
		return pc.c, nil
	}
	network, host := "tcp", selector.Strip(addr)
	for i := 0; i < len(host); i++ {
		if host[i] == '@' {
			network, host = host[:i], host[i+1:]
			break
		}
	}
	c := client.NewClient(p.opt)
	if err := c.Connect(network, host); err != nil {
		return nil, err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		c.Close()
		return nil, client.ErrShutdown
	}
	pc.c = c
	return c, nil
}

// Call runs service.method at addr over plain rpcx and waits for the
// reply or the end of ctx, and fills the response-metadata map in ctx as
// rpcx's Client.Call does. It waits on rpcx's Go rather than calling
// rpcx's Call, whose cancellation path races with its own sender (rpcx
// v1.9.4 reads the call's sequence number while the sending goroutine
// writes it); a call abandoned here completes when its reply comes or its
// connection closes.
func (p *PlainCaller) Call(ctx context.Context, addr, service, method string, args, reply any) error {
	c, err := p.conn(addr)
	if err != nil {
		return err
	}
	call := c.Go(ctx, service, method, args, reply, make(chan *client.Call, 1))
	select {
	case <-call.Done:
		fillResMetadata(ctx, call.ResMetadata, c.Conn)
		return call.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Go starts service.method at addr over plain rpcx and returns at once;
// the call is sent on done when it completes, its response metadata on the
// call (as rpcx's Go leaves it). A failed connect completes it
// at once with the error.
func (p *PlainCaller) Go(ctx context.Context, addr, service, method string, args, reply any, done chan *client.Call) *client.Call {
	if done == nil {
		done = make(chan *client.Call, 1) // as rpcx's Go does
	}
	c, err := p.conn(addr)
	if err != nil {
		call := &client.Call{ServicePath: service, ServiceMethod: method, Args: args, Reply: reply, Error: err, Done: done}
		done <- call
		return call
	}
	return c.Go(ctx, service, method, args, reply, done)
}

// Cast sends service.method to addr as an rpcx oneway call and returns
// once rpcx has written it (rpcx completes a oneway call then), or with
// its error: the arguments could not be encoded, the connection failed.
// If ctx ends first it returns ctx's error, and rpcx may still be
// encoding args.
func (p *PlainCaller) Cast(ctx context.Context, addr, service, method string, args any) error {
	c, err := p.conn(addr)
	if err != nil {
		return err
	}
	// rpcx's sender sets the call's error before it completes the call:
	// read it only after Done.
	call := c.Go(ctx, service, method, args, nil, make(chan *client.Call, 1))
	select {
	case <-call.Done:
		return call.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SerializeType returns the codec the clients encode arguments with (a
// Group copies a call's arguments with it).
func (p *PlainCaller) SerializeType() protocol.SerializeType { return p.opt.SerializeType }

// Close closes every client; later calls fail with client.ErrShutdown.
func (p *PlainCaller) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = map[string]*plainConn{}, true
	p.mu.Unlock()
	for _, pc := range conns {
		pc.mu.Lock()
		if pc.c != nil {
			pc.c.Close()
		}
		pc.mu.Unlock()
	}
	return nil
}
