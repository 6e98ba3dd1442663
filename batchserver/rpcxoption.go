package batchserver

import (
	"fmt"
	"reflect"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// rpcx's server.WithReadTimeout sets a read deadline before every request
// it reads and closes a connection that sends nothing before it. A lane
// sends heartbeats only while it hears nothing from the server, so a lane
// busy receiving, or one whose heartbeats are rarer than the timeout,
// would be cut while healthy. The handshake therefore tells each lane the
// server's read timeout (codec.MetaReadTimeout), and the lane writes
// something (a heartbeat when it has nothing else) well within it.

// serverReadTimeout returns the read timeout an rpcx server was given
// with server.WithReadTimeout, or 0.
func serverReadTimeout(s *server.Server) time.Duration {
	d, _ := serverField[time.Duration](s, "readTimeout")
	return d
}

// serverWriteTimeout returns the write timeout an rpcx server was given
// with server.WithWriteTimeout, or 0.
func serverWriteTimeout(s *server.Server) time.Duration {
	d, _ := serverField[time.Duration](s, "writeTimeout")
	return d
}

// serverField reads the unexported field name of an rpcx Server, of type
// T. rpcx v1.9.4 keeps what its options set (the pool, the read and write
// timeouts) in such fields with no accessor, so the plugin reads them with
// reflect and unsafe, after checking the field's name and type: on an rpcx
// where the field is not as in v1.9.4 it reports false and the plugin goes
// on without it (the tests of each option then fail). rpcxbatch is built
// against rpcx v1.9.4 exactly (go.mod). Only fields rpcx sets once, in
// NewServer, are read, so reading them races with nothing.
func serverField[T any](s *server.Server, name string) (T, bool) {
	var zero T
	f, ok := field(reflect.ValueOf(s).Elem(), name)
	if !ok || f.Type() != reflect.TypeFor[T]() {
		return zero, false
	}
	v, _ := f.Interface().(T) // a nil interface (no pool) is the zero T
	return v, true
}

// checkServerFields fails New on an rpcx whose option fields are not laid
// out as in v1.9.4: without them a WithPool bound or a timeout would
// silently not reach batched entries.
func checkServerFields(s *server.Server) error {
	_, pool := serverField[server.WorkerPool](s, "pool")
	_, rt := serverField[time.Duration](s, "readTimeout")
	_, wt := serverField[time.Duration](s, "writeTimeout")
	if !pool || !rt || !wt {
		return fmt.Errorf("%w (its pool and timeout options cannot be read)", ErrUnsupportedRPCX)
	}
	return nil
}

// rpcxOptions returns the plugin options that carry the rpcx server's own
// options onto the batch path, to be applied before the user's: a write
// timeout set with server.WithWriteTimeout bounds each reply-frame write,
// as it bounds each of rpcx's response writes, unless WithWriteTimeout is
// given to the plugin.
func rpcxOptions(s *server.Server) []Option {
	var opts []Option
	if d := serverWriteTimeout(s); d > 0 {
		opts = append(opts, WithWriteTimeout(d))
	}
	return opts
}

// advertiseReadTimeout puts the server's read timeout in the metadata of
// the handshake response being written on ctx.
func (p *Plugin) advertiseReadTimeout(ctx *server.Context) {
	d := serverReadTimeout(p.s)
	if d <= 0 {
		return
	}
	if meta, ok := ctx.Get(share.ResMetaDataKey).(map[string]string); ok {
		meta[codec.MetaReadTimeout] = d.String()
	}
}
