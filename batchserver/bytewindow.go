package batchserver

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// The byte window (WithWindowBytes) bounds the bytes of batch frames a
// connection makes the server hold, as the entry window (WithWindow)
// bounds their entries. A decoded entry aliases its frame, so a frame is
// held as a whole until the last of its entries has finished: its bytes
// are charged when it arrives (conn.hold) and given back when that
// last entry finishes, on the path that gives the entry's place in the
// entry window back (conn.queueReply, conn.credit). To a lane that keeps
// within the byte window (it said so in its handshake) the freed bytes go
// back in the next credit message, written beside the replies.

// frameHold is one frame's charge: its bytes, held until left, the frame's
// entries not yet finished, reaches 0.
type frameHold struct {
	left  atomic.Int32
	bytes int64
	// arrived is when rpcx read the frame: its entries' deadlines count
	// from then.
	arrived time.Time
	// slab holds the frame's decoded entries (entryslab.go), released by
	// the entry that finishes last; nil when they were made for the frame.
	slab *entrySlab
}

// byteWindow is a connection's part of the byte window.
type byteWindow struct {
	// held is the bytes of the frames delivered whose entries have not all
	// finished.
	held atomic.Int64
	// credit is the bytes freed and not yet handed back to the lane.
	credit atomic.Int64
	// credited is set when the lane said, in its handshake, that it keeps
	// within the byte window and reads credits that hand bytes back.
	credited atomic.Bool
}

// hold charges a frame of size bytes and n entries, read at arrived, to
// the connection. A
// lane keeps at most the byte window unfinished, or one frame of any size
// (within MaxFrameBytes) when nothing else is; as with the entry window,
// twice the window is a peer that ignores it, not a slow moment.
func (c *conn) hold(size, n int, arrived time.Time, slab *entrySlab) (*frameHold, error) {
	fr := &frameHold{bytes: int64(size), arrived: arrived, slab: slab}
	fr.left.Store(int32(max(n, 1)))
	limit := 2 * int64(c.p.opts.WindowBytes)
	if total := c.bytes.held.Add(fr.bytes); total > limit && total > fr.bytes {
		return nil, fmt.Errorf("%w: %d bytes of frames unfinished, byte window %d", ErrByteWindowExceeded, total, c.p.opts.WindowBytes)
	}
	if n == 0 {
		c.frameDone(fr) // no entry will finish it
	}
	return fr, nil
}

// frameDone records that one entry of fr finished; the last one frees the
// frame's bytes, and its entries' slab: the caller must not touch its
// entry after. The caller kicks the writer, which hands the bytes back.
func (c *conn) frameDone(fr *frameHold) {
	if fr == nil || fr.left.Add(-1) > 0 {
		return
	}
	fr.slab.release()
	fr.slab = nil
	c.bytes.held.Add(-fr.bytes)
	if c.bytes.credited.Load() {
		c.bytes.credit.Add(fr.bytes)
	}
}

// grantWindowBytes grants the byte window in the metadata of the handshake
// response being written on ctx, and notes whether the lane (st, nil when
// the connection is unknown) reads byte credits.
func (p *Plugin) grantWindowBytes(ctx *server.Context, st *conn) {
	if st != nil && ctx.Metadata()[codec.MetaByteCredits] != "" {
		st.bytes.credited.Store(true)
	}
	if meta, ok := ctx.Get(share.ResMetaDataKey).(map[string]string); ok {
		meta[codec.MetaWindowBytes] = strconv.Itoa(p.opts.WindowBytes)
	}
}
