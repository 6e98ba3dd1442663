package batchserver

import (
	"context"
	"net"
	"sync"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// hookContainer stands between rpcx and the server's plugins. rpcx runs its
// request hooks (PreReadRequest, PostReadRequest, PreHandleRequest,
// PreWriteResponse, PostWriteResponse) once per message it reads; on a
// lane that message is a batch frame holding many calls, or a lane's
// handshake or heartbeat. Those hooks skip such lane messages here, so that
// a rate limiter never refuses a frame (and with it every call inside) and
// a metrics plugin never counts one; the plugin runs the same hooks per
// entry instead (see entryhooks.go). Every other method, and every hook for
// a message that is not a lane message, goes to the server's own container
// unchanged, so plain rpcx clients of the server see no difference.
type hookContainer struct {
	server.PluginContainer // the server's own container

	// lanes holds the connections that carry batch frames: marked when
	// rpcx reads their handshake (in its read loop, before it reads the
	// next message), forgotten when rpcx closes them.
	lanes sync.Map // net.Conn -> struct{}

	// handshakeRead, when set, is told of each lane handshake rpcx reads,
	// in its read loop, before the handshake waits for a worker.
	handshakeRead func(net.Conn)
}

// wrapPlugins puts a hookContainer around s.Plugins, once.
func wrapPlugins(s *server.Server) *hookContainer {
	if hc, ok := s.Plugins.(*hookContainer); ok {
		return hc
	}
	hc := &hookContainer{PluginContainer: s.Plugins}
	s.Plugins = hc
	return hc
}

// isLaneMessage reports a message addressed to the batch service itself: a
// lane's handshake or one of its frames.
func isLaneMessage(r *protocol.Message) bool {
	return r != nil && r.ServicePath == codec.ServicePath &&
		(r.ServiceMethod == codec.MethodBatch || r.ServiceMethod == codec.MethodHandshake)
}

// onLane reports whether ctx is that of a message read from a lane.
func (h *hookContainer) onLane(ctx context.Context) bool {
	c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if c == nil {
		return false
	}
	_, ok := h.lanes.Load(c)
	return ok
}

// laneLevel reports a message that belongs to a lane rather than to one
// call: a frame, a handshake, or a heartbeat read from a lane.
func (h *hookContainer) laneLevel(ctx context.Context, r *protocol.Message) bool {
	return isLaneMessage(r) || (r != nil && r.Header != nil && r.IsHeartbeat() && h.onLane(ctx))
}

// DoPreReadRequest runs the PreReadRequest hooks before rpcx reads a
// message, except on a lane: what a lane sends next is a frame (its calls
// get the hook one by one) or a heartbeat.
func (h *hookContainer) DoPreReadRequest(ctx context.Context) error {
	if h.onLane(ctx) {
		return nil
	}
	return h.PluginContainer.DoPreReadRequest(ctx)
}

// DoPostReadRequest runs the PostReadRequest hooks for every message but a
// lane's; a lane's handshake marks its connection as a lane.
func (h *hookContainer) DoPostReadRequest(ctx context.Context, r *protocol.Message, e error) error {
	if e == nil && isLaneMessage(r) {
		// Only the handshake marks the lane: a Store on every frame would
		// allocate and write-lock a map all connections share.
		if r.ServiceMethod == codec.MethodHandshake {
			if c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn); c != nil {
				h.lanes.Store(c, struct{}{})
				if h.handshakeRead != nil {
					h.handshakeRead(c)
				}
			}
		}
		return nil
	}
	if e == nil && h.laneLevel(ctx, r) {
		return nil
	}
	return h.PluginContainer.DoPostReadRequest(ctx, r, e)
}

// DoPreHandleRequest runs the PreHandleRequest hooks for every message but
// a lane's.
func (h *hookContainer) DoPreHandleRequest(ctx context.Context, r *protocol.Message) error {
	if h.laneLevel(ctx, r) {
		return nil
	}
	return h.PluginContainer.DoPreHandleRequest(ctx, r)
}

// DoPreWriteResponse runs the PreWriteResponse hooks for every response but
// one to a lane's message.
func (h *hookContainer) DoPreWriteResponse(ctx context.Context, req, res *protocol.Message, err error) error {
	if h.laneLevel(ctx, req) {
		return nil
	}
	return h.PluginContainer.DoPreWriteResponse(ctx, req, res, err)
}

// DoPostWriteResponse runs the PostWriteResponse hooks for every response
// but one to a lane's message.
func (h *hookContainer) DoPostWriteResponse(ctx context.Context, req, res *protocol.Message, err error) error {
	if h.laneLevel(ctx, req) {
		return nil
	}
	return h.PluginContainer.DoPostWriteResponse(ctx, req, res, err)
}

// DoPostConnClose forgets a closed lane, then runs the hooks.
func (h *hookContainer) DoPostConnClose(c net.Conn) bool {
	h.lanes.Delete(c)
	return h.PluginContainer.DoPostConnClose(c)
}

// hookSet records which request hooks the server's plugins implement.
type hookSet uint8

const (
	hookPreRead hookSet = 1 << iota
	hookPostRead
	hookPreHandle
	hookPreWrite
	hookPostWrite
)

// present returns the request hooks the server's plugins implement now
// (plugins may be added and removed while the server runs).
func (h *hookContainer) present() hookSet {
	var hs hookSet
	for _, pl := range h.All() {
		if _, ok := pl.(server.PreReadRequestPlugin); ok {
			hs |= hookPreRead
		}
		if _, ok := pl.(server.PostReadRequestPlugin); ok {
			hs |= hookPostRead
		}
		if _, ok := pl.(server.PreHandleRequestPlugin); ok {
			hs |= hookPreHandle
		}
		if _, ok := pl.(server.PreWriteResponsePlugin); ok {
			hs |= hookPreWrite
		}
		if _, ok := pl.(server.PostWriteResponsePlugin); ok {
			hs |= hookPostWrite
		}
	}
	return hs
}
