package batchserver

import (
	"fmt"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
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
	d, _ := rpcxlayout.ReadTimeout(s)
	return d
}

// serverWriteTimeout returns the write timeout an rpcx server was given
// with server.WithWriteTimeout, or 0.
func serverWriteTimeout(s *server.Server) time.Duration {
	d, _ := rpcxlayout.WriteTimeout(s)
	return d
}

// checkServerFields fails New on an rpcx whose option fields are not laid
// out as in v1.9.4 (rpcx keeps them unexported, with no accessor; see
// internal/rpcxlayout): without them a WithPool bound or a timeout would
// silently not reach batched entries.
func checkServerFields(s *server.Server) error {
	_, pool := rpcxlayout.Pool(s)
	_, rt := rpcxlayout.ReadTimeout(s)
	_, wt := rpcxlayout.WriteTimeout(s)
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
