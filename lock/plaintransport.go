package lock

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// PlainTransport reaches the other nodes over plain rpcx: one rpcx client
// (one TCP connection) per node, each call its own message, as rpcx does.
// It exists to run the same lock code over both transports side by side;
// use a *batchclient.Client in production.
type PlainTransport struct {
	opt client.Option

	mu      sync.Mutex // guards clients, dials and closed
	clients map[string]*client.Client
	dials   map[string]*plainDial // dials in progress, one per address
	closed  bool
	wg      sync.WaitGroup // the dials in progress; Close waits for them
}

// plainDial is a dial in progress; c and err are set before done closes.
type plainDial struct {
	done chan struct{}
	c    *client.Client
	err  error
}

// NewPlainTransport returns a PlainTransport whose connections use opt
// (client.DefaultOption when in doubt).
func NewPlainTransport(opt client.Option) *PlainTransport {
	return &PlainTransport{opt: opt, clients: make(map[string]*client.Client), dials: make(map[string]*plainDial)}
}

// client returns addr's connection, dialing it if need be. The dial runs
// on a goroutine of its own (one per address, however many callers wait)
// and without p.mu, so that a caller waits for it only until ctx ends and
// a node that does not accept connections holds up no call to the others.
func (p *PlainTransport) client(ctx context.Context, addr string) (*client.Client, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	c := p.clients[addr]
	if c != nil && !c.IsShutdown() && !c.IsClosing() {
		p.mu.Unlock()
		return c, nil
	}
	d := p.dials[addr]
	if d == nil {
		d = &plainDial{done: make(chan struct{})}
		p.dials[addr] = d
		p.wg.Add(1)
		go p.dial(addr, d)
	}
	p.mu.Unlock()
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dial connects to addr (for up to the option's ConnectTimeout) and
// publishes the outcome to every caller waiting for it.
func (p *PlainTransport) dial(addr string, d *plainDial) {
	defer p.wg.Done()
	network, address := "tcp", addr
	if i := strings.Index(addr, "@"); i >= 0 {
		network, address = addr[:i], addr[i+1:]
	}
	c := client.NewClient(p.opt)
	err := c.Connect(network, address)
	p.mu.Lock()
	delete(p.dials, addr)
	switch {
	case err != nil:
		d.err = fmt.Errorf("%w: %s: %w", ErrNodeLost, addr, err)
	case p.closed:
		c.Close()
		d.err = ErrClosed
	default:
		p.clients[addr] = c
		d.c = c
	}
	p.mu.Unlock()
	close(d.done)
}

// Call runs servicePath.serviceMethod at addr and waits for its reply. A
// failed dial is ErrNodeLost (wrapping rpcx's error), a call after Close
// ErrClosed; otherwise the error is rpcx's client's.
func (p *PlainTransport) Call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any) error {
	c, err := p.client(ctx, addr)
	if err != nil {
		return err
	}
	// plainconn.Call waits on rpcx's Go (rpcx v1.9.4's Client.Call races
	// with its own send goroutine when ctx ends first) and decodes the
	// reply into a copy. The response metadata is left alone, as it
	// always was here: the lock's own calls run under the node's contexts,
	// which hold no metadata map.
	return plainconn.Call(ctx, c, servicePath, serviceMethod, args, reply, plainconn.NoResMeta)
}

// Cast runs servicePath.serviceMethod at addr without waiting for its
// reply.
func (p *PlainTransport) Cast(ctx context.Context, addr, servicePath, serviceMethod string, args any) error {
	c, err := p.client(ctx, addr)
	if err != nil {
		return err
	}
	c.Go(ctx, servicePath, serviceMethod, args, &Ack{}, make(chan *client.Call, 1))
	return nil
}

// Close closes every connection, and waits for the dials in progress
// (each ends within the option's ConnectTimeout).
func (p *PlainTransport) Close() error {
	p.mu.Lock()
	p.closed = true
	for a, c := range p.clients {
		c.Close()
		delete(p.clients, a)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// Go starts servicePath.serviceMethod at addr and returns at once; the
// call is sent on done when its reply arrives (rpcx's Client.Go, which
// does not end the call when ctx ends). A failed dial completes it at
// once.
func (p *PlainTransport) Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	if done == nil {
		// A completion on a nil channel would block for good.
		done = make(chan *client.Call, 1)
	}
	c, err := p.client(ctx, addr)
	if err != nil {
		call := &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args, Reply: reply, Error: err, Done: done}
		plainconn.Deliver(call) // never blocks the caller, as rpcx's Call.done
		return call
	}
	return c.Go(ctx, servicePath, serviceMethod, args, reply, done)
}
