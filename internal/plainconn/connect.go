package plainconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"reflect"
	"sync"

	"github.com/smallnest/rpcx/client"
)

// rpcx's Client.Connect takes no context, so over TCP and unix sockets the
// connection is dialled here, cancellably, and handed to Connect through a
// connection factory of its own network name.

// predialedNetwork is the rpcx network name under which Connect takes a
// connection dialled by Connect of this package.
const predialedNetwork = "rpcxbatch+predialed"

// predialed holds, per rpcx client, the connection its Connect is to take.
var predialed sync.Map // *client.Client -> net.Conn

// errNoPredialed should not happen: Connect ran on the predialed network
// without a connection waiting for it.
var errNoPredialed = errors.New("plainconn: no dialled connection for the plain client")

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

// Connect connects pc, made with option opt, to addr as pc.Connect would,
// but gives up when ctx ends. Networks other than TCP and unix sockets go
// through rpcx's own Connect, bounded by opt.ConnectTimeout only.
func Connect(ctx context.Context, pc *client.Client, opt client.Option, network, addr string) error {
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
		// Connect would use. It takes no context: it runs on the slot's dial
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
	return connectPredialed(pc, addr, conn)
}

// Adopt makes pc take conn, a connection to addr already dialled (over
// TLS when pc's option has it) and already reported to the ConnCreated
// plugins, as its Connect takes one it dialled: rpcx's Connect then runs
// pc's ConnCreated plugins on it, which the caller's plugins skip for
// conn. On failure conn is closed.
func Adopt(pc *client.Client, addr string, conn net.Conn) error {
	return connectPredialed(pc, addr, conn)
}

// connectPredialed makes pc's Connect take conn (see predialed); on
// failure conn is closed.
func connectPredialed(pc *client.Client, addr string, conn net.Conn) error {
	predialed.Store(pc, conn)
	if err := pc.Connect(predialedNetwork, addr); err != nil {
		if c, ok := predialed.LoadAndDelete(pc); ok {
			c.(net.Conn).Close()
		}
		return err
	}
	return nil
}

// AppFactory reports whether the application replaced rpcx's connection
// factory for network (client.ConnFactories), with which rpcx's Connect
// dials: a connection made otherwise is not one rpcx would use.
func AppFactory(network string) bool {
	f := client.ConnFactories[network]
	return f != nil && factoryPointer(f) != rpcxDirectConn
}
