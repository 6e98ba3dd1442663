package batchserver

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// hookContainer stands between rpcx and the server's plugins. rpcx runs its
// request hooks (PreReadRequest, PostReadRequest, PreHandleRequest,
// PreWriteResponse, PostWriteResponse) once per message it reads, on a
// lane most often a batch frame of many calls. Those hooks skip batch
// frames here, so that a rate limiter never refuses a frame (and every
// call inside) and a metrics plugin never counts one; the plugin runs the
// same hooks per entry instead (entryhooks.go).
//
// A lane's own upkeep (the one handshake that makes a connection a lane,
// heartbeats no more often than laneBeatGap) skips the read hooks too, as
// a plain client sends no such thing. Anything else read on a lane goes
// through every read hook as on a plain connection, PreReadRequest
// included (see DoPreReadRequest): writing to a lane bypasses no guard.
// Every other method goes to the server's own container unchanged.
type hookContainer struct {
	server.PluginContainer // the server's own container

	// lanes holds the connections that carry batch frames: marked when
	// rpcx reads their handshake (in its read loop, before it reads the
	// next message), forgotten when rpcx closes them.
	lanes sync.Map // net.Conn -> *laneMark

	// handshakeRead, when set, is told of each lane handshake rpcx reads,
	// in its read loop, before the handshake waits for a worker.
	handshakeRead func(net.Conn)
	// frameRead, when set, is told of each frame rpcx reads on a lane, in
	// its read loop, before the goroutine that handles the frame starts;
	// false has the frame's entries not run (unrunKey).
	frameRead func() bool
}

// unrunKey marks, in a frame's context, a frame whose entries are not to
// run: it was read once Shutdown may have looked at its count of requests
// being handled (Plugin.frameRead).
type unrunKey struct{}

// laneBeatGap is how often a lane's heartbeats may come and still skip the
// read hooks. A lane sends one when it has heard nothing for its heartbeat
// interval (500 ms by default) or for a third of the server's read
// timeout; one sooner than laneBeatGap after the last that skipped them is
// not upkeep, and meets the hooks as a plain connection's heartbeat does.
const laneBeatGap = 100 * time.Millisecond

// laneMark is what the hooks know of a lane.
type laneMark struct {
	// freeBeat is when a heartbeat last skipped the read hooks. Only the
	// connection's read loop (rpcx's, one per connection) touches it.
	freeBeat time.Time
	// unstarted counts the frames rpcx has read on the lane whose handler
	// has not yet counted their entries in (conn.deliver): rpcx counts a
	// request as being handled only once the goroutine it starts for it
	// runs, and a drain must not take a frame read before then for
	// nothing in flight (conn.idle).
	unstarted atomic.Int64
}

// upkeep reports whether a heartbeat read now skips the read hooks.
func (m *laneMark) upkeep(now time.Time) bool {
	if now.Sub(m.freeBeat) < laneBeatGap {
		return false
	}
	m.freeBeat = now
	return true
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

// isFrame reports a batch frame: a message to the batch service's batch
// method, whose entries get the request hooks one by one.
func isFrame(r *protocol.Message) bool {
	return r != nil && r.ServicePath == codec.ServicePath && r.ServiceMethod == codec.MethodBatch
}

// isLaneMessage reports a message addressed to the batch service itself: a
// lane's handshake or one of its frames.
func isLaneMessage(r *protocol.Message) bool {
	return r != nil && r.ServicePath == codec.ServicePath &&
		(r.ServiceMethod == codec.MethodBatch || r.ServiceMethod == codec.MethodHandshake)
}

// lane returns the mark of the lane ctx's message was read from, or nil.
func (h *hookContainer) lane(ctx context.Context) *laneMark {
	c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if c == nil {
		return nil
	}
	m, _ := h.lanes.Load(c)
	lm, _ := m.(*laneMark)
	return lm
}

// mark returns the mark of c, or nil unless c has made a lane handshake
// and is not closed.
func (h *hookContainer) mark(c net.Conn) *laneMark {
	m, _ := h.lanes.Load(c)
	lm, _ := m.(*laneMark)
	return lm
}

// DoPreReadRequest runs the PreReadRequest hooks before rpcx reads a
// message, except on a lane: what a lane sends next is most often a frame,
// whose calls get the hook one by one. For any other message read on a
// lane that is not upkeep, DoPostReadRequest runs the hook first.
func (h *hookContainer) DoPreReadRequest(ctx context.Context) error {
	if h.lane(ctx) != nil {
		return nil
	}
	return h.PluginContainer.DoPreReadRequest(ctx)
}

// DoPostReadRequest runs the read hooks for every message but a frame and
// a lane's upkeep (see hookContainer); a connection's first handshake
// marks it as a lane, and a frame counts as read (laneMark.unstarted).
func (h *hookContainer) DoPostReadRequest(ctx context.Context, r *protocol.Message, e error) error {
	if e == nil && isFrame(r) {
		// A frame on a connection that is not a lane is refused by its
		// handler.
		if m := h.lane(ctx); m != nil {
			m.unstarted.Add(1)
			if h.frameRead != nil && !h.frameRead() {
				// The request's context is the one its handler gets.
				if sc, ok := ctx.(*share.Context); ok {
					share.WithLocalValue(sc, unrunKey{}, true)
				}
			}
		}
		return nil
	}
	m := h.lane(ctx)
	if e == nil {
		switch {
		case m != nil && r.IsHeartbeat() && m.upkeep(time.Now()):
			return nil
		case m == nil && r.ServicePath == codec.ServicePath && r.ServiceMethod == codec.MethodHandshake:
			// Only the handshake marks the lane: a Store on every frame
			// would allocate and write-lock a map all connections share.
			if c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn); c != nil {
				h.lanes.Store(c, &laneMark{})
				if h.handshakeRead != nil {
					h.handshakeRead(c)
				}
			}
			return nil
		}
	}
	if m != nil {
		if err := h.PluginContainer.DoPreReadRequest(ctx); err != nil {
			return err
		}
	}
	return h.PluginContainer.DoPostReadRequest(ctx, r, e)
}

// DoPreHandleRequest runs the PreHandleRequest hooks for every message but
// a lane's frame or handshake.
func (h *hookContainer) DoPreHandleRequest(ctx context.Context, r *protocol.Message) error {
	if isLaneMessage(r) {
		return nil
	}
	return h.PluginContainer.DoPreHandleRequest(ctx, r)
}

// DoPreWriteResponse runs the PreWriteResponse hooks for every response but
// one to a lane's frame or handshake.
func (h *hookContainer) DoPreWriteResponse(ctx context.Context, req, res *protocol.Message, err error) error {
	if isLaneMessage(req) {
		return nil
	}
	return h.PluginContainer.DoPreWriteResponse(ctx, req, res, err)
}

// DoPostWriteResponse runs the PostWriteResponse hooks for every response
// but one to a lane's frame or handshake.
func (h *hookContainer) DoPostWriteResponse(ctx context.Context, req, res *protocol.Message, err error) error {
	if isLaneMessage(req) {
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
