package group

import (
	"context"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
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
	// conns holds the client of each address (internal/plainconn): one
	// connect at a time per address, which every caller waits for within
	// its own context, and Close cancels.
	conns *plainconn.Map
}

var _ Caller = (*PlainCaller)(nil)

// NewPlainCaller returns a PlainCaller whose clients use opt (for example
// client.DefaultOption).
func NewPlainCaller(opt client.Option) *PlainCaller {
	p := &PlainCaller{opt: opt}
	p.conns = plainconn.NewMap(client.ErrShutdown, p.slotConfig)
	return p
}

// slotConfig is how the client of addr is made.
func (p *PlainCaller) slotConfig(addr string) plainconn.Config {
	network, host := "tcp", selector.Strip(addr)
	for i := 0; i < len(host); i++ {
		if host[i] == '@' {
			network, host = host[:i], host[i+1:]
			break
		}
	}
	return plainconn.Config{
		Addr:    addr,
		Stopped: client.ErrShutdown,
		Dial: func(ctx context.Context) (*client.Client, error) {
			c := client.NewClient(p.opt)
			return c, plainconn.Connect(ctx, c, p.opt, network, host)
		},
	}
}

// conn returns a connected client for addr in use until its Done,
// waiting for a connect at most as long as ctx allows.
func (p *PlainCaller) conn(ctx context.Context, addr string) (plainconn.Lease, error) {
	return p.conns.Use(ctx, addr)
}

// Call runs service.method at addr over plain rpcx and waits for the
// reply or the end of ctx, and fills the response-metadata map in ctx as
// rpcx's Client.Call does. It waits on rpcx's Go rather than calling
// rpcx's Call, whose cancellation path races with its own sender (rpcx
// v1.9.4 reads the call's sequence number while the sending goroutine
// writes it); a call abandoned here completes when its reply comes or its
// connection closes, and its reply is not written into reply.
func (p *PlainCaller) Call(ctx context.Context, addr, service, method string, args, reply any) error {
	u, err := p.conn(ctx, addr)
	if err != nil {
		return err
	}
	defer u.Done()
	return plainconn.Call(ctx, u.Client, service, method, args, reply, plainconn.FillResMeta)
}

// Go starts service.method at addr over plain rpcx and returns at once;
// the call is sent on done when it completes, its response metadata on the
// call (as rpcx's Go leaves it). A failed connect completes it
// at once with the error.
func (p *PlainCaller) Go(ctx context.Context, addr, service, method string, args, reply any, done chan *client.Call) *client.Call {
	if done == nil {
		done = make(chan *client.Call, 1) // as rpcx's Go does
	}
	u, err := p.conn(ctx, addr)
	if err != nil {
		call := &client.Call{ServicePath: service, ServiceMethod: method, Args: args, Reply: reply, Error: err, Done: done}
		plainconn.Deliver(call) // never blocks the caller, as rpcx's Call.done
		return call
	}
	// Nothing here retires a client, so the use can end before the call
	// does (Close ends it either way).
	u.Done()
	return u.Client.Go(ctx, service, method, args, reply, done)
}

// Cast sends service.method to addr as an rpcx oneway call and returns
// once rpcx has written it (rpcx completes a oneway call then), or with
// its error: the arguments could not be encoded, the connection failed.
// If ctx ends first it returns ctx's error, and rpcx may still be
// encoding args.
func (p *PlainCaller) Cast(ctx context.Context, addr, service, method string, args any) error {
	u, err := p.conn(ctx, addr)
	if err != nil {
		return err
	}
	defer u.Done()
	c := u.Client
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

// Close closes every client, cancelling connects under way; later calls
// fail with client.ErrShutdown.
func (p *PlainCaller) Close() error {
	p.conns.Close()
	return nil
}
