package batchserver

import (
	"reflect"
	"time"
	"unsafe"

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
// with server.WithReadTimeout, or 0. rpcx keeps it in an unexported field
// (Server.readTimeout) with no accessor: it is read with reflect and
// unsafe after checking the field's name and type, as serverPool does,
// and is 0 on an rpcx where the field is not as in v1.9.4.
func serverReadTimeout(s *server.Server) time.Duration {
	f := reflect.ValueOf(s).Elem().FieldByName("readTimeout")
	if !f.IsValid() || f.Type() != reflect.TypeFor[time.Duration]() {
		return 0
	}
	return *(*time.Duration)(unsafe.Pointer(f.UnsafeAddr()))
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
