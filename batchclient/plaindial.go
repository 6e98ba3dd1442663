package batchclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/smallnest/rpcx/client"
)

// The plain fallback's connect runs apart from the calls that need it: one
// dial per peer at a time, owned by the peer (Stop cancels and joins it),
// while each caller waits for it only as long as its own context allows.
// rpcx's Client.Connect takes no context, so over TCP and unix sockets the
// connection is dialled here, cancellably, and handed to Connect through a
// connection factory of its own network name.

// predialedNetwork is the rpcx network name under which Connect takes a
// connection dialled by connectPlain.
const predialedNetwork = "rpcxbatch+predialed"

// predialed holds, per rpcx client, the connection its Connect is to take.
var predialed sync.Map // *client.Client -> net.Conn

// errNoPredialed should not happen: Connect ran on the predialed network
// without a connection waiting for it.
var errNoPredialed = errors.New("rpcxbatch: no dialled connection for the plain client")

// rpcxDirectConn is the code pointer of rpcx's own factory for "unix"
// (its plain net dial), taken at init before any user could replace it: a
// factory in ConnFactories that is not rpcx's own is the application's.
var rpcxDirectConn = factoryPointer(client.ConnFactories["unix"])

func factoryPointer(f client.ConnFactoryFn) uintptr {
	if f == nil {
		return 0
	}
	return reflect.ValueOf(f).Pointer()
}

func init() {
	client.ConnFactories[predialedNetwork] = func(c *client.Client, _, _ string) (net.Conn, error) {
		conn, ok := predialed.LoadAndDelete(c)
		if !ok {
			return nil, errNoPredialed
		}
		return conn.(net.Conn), nil
	}
}

// connectPlain connects pc to addr as pc.Connect would, but gives up when
// ctx ends. Networks other than TCP and unix sockets go through rpcx's own
// Connect, bounded by its ConnectTimeout only.
func connectPlain(ctx context.Context, pc *client.Client, opt client.Option, network, addr string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "unix":
	default:
		return pc.Connect(network, addr)
	}
	if opt.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.ConnectTimeout)
		defer cancel()
	}
	var conn net.Conn
	var err error
	if f := client.ConnFactories[network]; f != nil && factoryPointer(f) != rpcxDirectConn {
		// The application's own factory (a proxy dialer, say), which rpcx's
		// Connect would use. It takes no context: it runs on the peer's dial
		// goroutine, and callers still wait for it only within theirs.
		conn, err = f(pc, network, addr)
	} else if opt.TLSConfig != nil {
		conn, err = (&tls.Dialer{Config: opt.TLSConfig}).DialContext(ctx, network, addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	if err != nil {
		if pc.Plugins != nil {
			pc.Plugins.DoConnCreateFailed(network, addr)
		}
		return err
	}
	predialed.Store(pc, conn)
	if err := pc.Connect(predialedNetwork, addr); err != nil {
		if c, ok := predialed.LoadAndDelete(pc); ok {
			c.(net.Conn).Close()
		}
		return err
	}
	return nil
}

// plainDial is one connect of a peer's plain client under way; done is
// closed when it is over, with pc installed as the peer's plain client or
// err set.
type plainDial struct {
	done chan struct{}
	pc   *client.Client
	err  error
}

// plainDialer is the peer's side of plain dials: the one under way, and
// what Stop uses to cancel and join it.
type plainDialer struct {
	dialing *plainDial // under peer.plainMu
	stopped bool       // under peer.plainMu: no dial starts any more
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// usePlain returns the peer's plain rpcx client, connecting it when needed,
// in use (see plainInUse) until the caller's done. The caller waits for the
// connect only as long as ctx allows; the connect itself belongs to the
// peer, and later callers join it rather than queue behind it.
func (p *peer) usePlain(ctx context.Context) (plainRef, error) {
	for {
		p.plainMu.Lock()
		if p.view.Load().state == stateForgotten {
			// forgetPlain has taken the client away: route looks again.
			p.plainMu.Unlock()
			return plainRef{}, errForgotten
		}
		if p.plainClient != nil && !p.plainClient.IsShutdown() && !p.plainClient.IsClosing() {
			p.plainInUse.Add(1)
			pc := p.plainClient
			p.plainMu.Unlock()
			return plainRef{pc, p}, nil
		}
		if p.pd.stopped {
			p.plainMu.Unlock()
			return plainRef{}, ErrStopped
		}
		d := p.pd.dialing
		if d == nil {
			if p.plainClient != nil {
				// The plain connection broke, most often because the
				// server restarted: maybe with the batch plugin now.
				select {
				case p.reprobe <- struct{}{}:
				default:
				}
			}
			d = &plainDial{done: make(chan struct{})}
			p.pd.dialing = d
			p.pd.wg.Add(1)
			go p.dialPlain(d)
		}
		p.plainMu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return plainRef{}, ctx.Err()
		}
		if d.err != nil {
			return plainRef{}, d.err
		}
		p.plainMu.Lock()
		if p.plainClient == d.pc && p.view.Load().state != stateForgotten {
			// Handed out as dialled, even if it broke at once: the call
			// reports that failure rather than dial again.
			p.plainInUse.Add(1)
			p.plainMu.Unlock()
			return plainRef{d.pc, p}, nil
		}
		p.plainMu.Unlock()
	}
}

// dialPlain connects a new plain client for d and installs it, unless the
// peer stopped or was forgotten meanwhile.
func (p *peer) dialPlain(d *plainDial) {
	defer p.pd.wg.Done()
	pc := p.c.newPlainClient(p.key)
	err := connectPlain(p.pd.ctx, pc, p.c.opts.RPCX, p.network, p.addr)
	p.plainMu.Lock()
	p.pd.dialing = nil
	if err == nil && (p.pd.stopped || p.view.Load().state == stateForgotten) {
		pc.Close()
		err = fmt.Errorf("%w: %s", ErrStopped, p.addr)
	}
	if err == nil {
		p.plainClient = pc
		if p.view.Load().state == stateBatch {
			// The server gained the batch plugin while this dial was under
			// way (its manager may have looked for a plain client to
			// retire before this one was in place): retired as run does.
			time.AfterFunc(p.c.opts.ReprobePlain, func() { p.retirePlain(pc) })
		}
	}
	d.pc, d.err = pc, err
	p.plainMu.Unlock()
	close(d.done)
}

// stopPlainDials cancels a plain dial under way and waits for it: over TCP
// and unix sockets that is at once; other networks' connects end within
// rpcx's ConnectTimeout.
func (p *peer) stopPlainDials() {
	p.plainMu.Lock()
	p.pd.stopped = true
	p.plainMu.Unlock()
	p.pd.cancel()
	p.pd.wg.Wait()
}
