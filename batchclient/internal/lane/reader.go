package lane

import (
	"fmt"
	"math"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/stackpad"
)

// The reader: the lane's one goroutine that reads from the socket. It
// matches reply frames to the pending table (claiming each call and
// completing it), takes credits back into the windows, hears drain
// notices, and hands server pushes to the client (Config.OnPush).

// maxReaderDecode is the largest reply the reader decodes itself for a
// caller that could decode it (see Pending.DeferDecode).
const maxReaderDecode = 4 << 10

// readLoop is the reader goroutine; it ends when the connection fails.
func (l *Lane) readLoop() {
	defer l.wg.Done()
	var pad stackpad.Pad // see stackpad: no shrink and regrow between frames
	stackpad.Touch(&pad)
	defer stackpad.Touch(&pad)
	rb := newReadBuf(progressReader{l})
	var (
		buf     []byte
		replies []codec.Reply
		pcs     []*Pending
		fc      fastcodec.Codec // decodes the replies
	)
	frameCap := l.cfg.MaxFrameBytes + 64<<10
	for {
		msg, b, err := codec.ReadMessageInflate(rb.br, readCap(frameCap), frameCap, buf)
		if err != nil {
			l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
			return
		}
		if len(b) > frameCap && !isReplyFrame(&msg) {
			// Only a reply too large for a frame comes larger (below).
			l.fail(fmt.Errorf("%w: %w: message of %d bytes, cap %d", ErrConnection, codec.ErrFrameTooLarge, len(b), frameCap))
			return
		}
		if cap(b) <= 4<<20 {
			buf = b
		}
		l.noteRead(&msg.Header)
		rb.read(len(b))
		switch {
		case msg.Header.IsHeartbeat():
			if msg.Header.MessageType() == protocol.Response {
				// The answer to a heartbeat of this lane's, which it sends
				// only once it has heard nothing for a while: the lane is
				// quiet, and lets go of its large buffers until the
				// traffic is back. (The server's own heartbeats come while
				// its handlers are busy.)
				rb.quiet()
				if cap(buf) > quietReadBuf {
					buf = nil
				}
			}
		case isReplyFrame(&msg):
			var inc uint64
			inc, replies, err = codec.DecodeReplies(msg.Payload, 0, replies)
			if err == nil && len(b) > frameCap && len(replies) != 1 {
				err = fmt.Errorf("%w: reply frame of %d bytes holds %d replies, cap %d", codec.ErrFrameTooLarge, len(b), len(replies), frameCap)
			}
			if err == nil {
				err = inflateReplies(replies, len(b), frameCap)
			}
			if err != nil {
				l.fail(fmt.Errorf("%w: bad reply frame: %w", ErrConnection, err))
				return
			}
			if inc != l.hs.Incarnation {
				// Not this lane's server: never let it reach a call.
				l.cfg.Metrics.ErrStale.Inc(1)
				continue
			}
			pcs = l.pending.claimAll(replies, pcs)
			// The window's places go back before the callers are woken,
			// so that a caller whose next call finds nothing else in
			// flight writes it itself (combine.go); a writer that waits
			// for them is woken after the callers, as before, so that it
			// settles for their next calls (settle.Settle counts them).
			stalled := l.giveBack(len(replies))
			l.countWoken(pcs)
			woken := 0
			for i := range replies {
				if pcs[i] != nil {
					l.complete(&replies[i], pcs[i], &fc)
					woken++
				}
				replies[i], pcs[i] = codec.Reply{}, nil
			}
			if stalled {
				l.wakeWriter()
			}
			l.checkDrained()
			if woken == 1 && rb.br.Buffered() == 0 {
				yieldToCaller()
			}
		case msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodCredit:
			inc, n, freed, err := codec.DecodeCreditBytes(msg.Payload)
			if err != nil {
				l.fail(fmt.Errorf("%w: bad credit message: %w", ErrConnection, err))
				return
			}
			if inc == l.hs.Incarnation {
				l.releaseBytes(freed)
				l.credited.Add(n)
				if n > 0 {
					l.release(int(min(n, uint64(l.window))))
				}
			}
		case msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodDrain:
			if err := l.onDrainNotice(msg.Payload); err != nil {
				l.fail(fmt.Errorf("%w: bad drain notice: %w", ErrConnection, err))
				return
			}
		case msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodUnrun:
			if err := l.onUnrun(msg.Payload); err != nil {
				l.fail(fmt.Errorf("%w: bad unrun notice: %w", ErrConnection, err))
				return
			}
		case msg.Header.MessageType() == protocol.Response && msg.Header.MessageStatusType() == protocol.Error:
			// rpcx refused a frame (its AuthFunc, typically) and is about
			// to close the connection.
			l.fail(fmt.Errorf("%w: server refused a frame: %s", ErrConnection, msg.Metadata[protocol.ServiceError]))
			return
		case isPush(&msg):
			l.cfg.OnPush(msg, l.dead) // a handler's Server.SendMessage (Config.OnPush)
		}
	}
}

// complete hands one reply to its claimed call, decoding the result into
// the call's reply value. The call's caller, if one of Call, is counted
// in Config.Woken already (countWoken).
func (l *Lane) complete(rp *codec.Reply, pc *Pending, fc *fastcodec.Codec) {
	call := pc.Call
	if r := pc.Response; r != nil {
		r.Read, r.Compress = true, rp.CompressType
		r.Payload = append([]byte(nil), rp.Payload...)
	}
	if rp.Metadata != nil {
		call.ResMetadata = rp.Metadata
	}
	var err error
	switch {
	case rp.Status == codec.StatusError:
		call.ResMetadata = withServiceError(rp.Metadata, rp.Error)
		err = l.serviceError(call, rp)
		// The reply the handler filled in before it failed: rpcx's server
		// sends it beside the error and rpcx's client decodes it into the
		// call's reply, ignoring a decode error; so does this (a Call's
		// caller, unless it returns its context's error instead).
		switch {
		case len(rp.Payload) == 0 || call.Reply == nil:
		case pc.DeferDecode:
			pc.Raw = append(pc.Raw[:0], rp.Payload...)
			pc.Undecoded = true
		default:
			_ = DecodeReply(fc, l.cfg.SerializeType, rp.Payload, call.Reply, false)
		}
	case len(rp.Payload) == 0:
		// rpcx's client decodes no empty reply: the caller's value stays
		// as it was (a []byte is not emptied, a message not reset, and a
		// codec that refuses empty input is not asked).
	case pc.DeferDecode && len(rp.Payload) > maxReaderDecode:
		pc.Raw = append(pc.Raw[:0], rp.Payload...)
		pc.Undecoded = true
	case call.Reply != nil:
		err = DecodeReply(fc, l.cfg.SerializeType, rp.Payload, call.Reply, false)
	}
	if err != nil {
		l.cfg.Metrics.ErrService.Inc(1)
	}
	l.finishCounted(pc, err) // counted for the frame (countWoken)
}

// ServiceError turns a server's error text into the error rpcx's own client
// would return for it, so callers see one error type on both paths. rpcx's
// client.ClientErrorFunc, when set, gets a response holding only the
// text; a call's error reply goes to it whole (Lane.serviceError).
func ServiceError(text string) error {
	if client.ClientErrorFunc != nil {
		res := protocol.NewMessage()
		res.Metadata = map[string]string{protocol.ServiceError: text}
		return client.ClientErrorFunc(res, text)
	}
	return client.NewServiceError(text)
}

// serviceError is the error of call, failed with the error reply rp,
// whose ResMetadata holds the reply's metadata and the error text already:
// rpcx's client.ServiceError of the text, or what client.ClientErrorFunc
// makes of the response as rpcx's client reads it (the call's service
// path and method, the reply's metadata with the error under
// protocol.ServiceError, status Error, the lane's serialize type and the
// reply sent beside the error as payload; its Seq is the call's id).
func (l *Lane) serviceError(call *client.Call, rp *codec.Reply) error {
	if client.ClientErrorFunc == nil {
		return client.NewServiceError(rp.Error)
	}
	res := protocol.NewMessage()
	res.SetMessageType(protocol.Response)
	res.SetMessageStatusType(protocol.Error)
	res.SetSerializeType(l.cfg.SerializeType)
	res.SetSeq(rp.ID)
	res.ServicePath, res.ServiceMethod = call.ServicePath, call.ServiceMethod
	res.Metadata = call.ResMetadata
	// A copy: the function may keep the message, and the lane reuses the
	// bytes the payload is read into.
	res.Payload = append([]byte(nil), rp.Payload...)
	return client.ClientErrorFunc(res, rp.Error)
}

// isPush reports whether msg is a server-pushed message for the user, by
// rpcx's test (a oneway request that is not a heartbeat), leaving out the
// plugin's own messages.
func isPush(msg *codec.Message) bool {
	h := &msg.Header
	return h.MessageType() == protocol.Request && h.IsOneway() && !h.IsHeartbeat() && msg.ServicePath != codec.ServicePath
}

// withServiceError is the response metadata rpcx's client sees for a
// failed call: the server's metadata plus the error text under
// protocol.ServiceError, which rpcx's server puts there before the
// handler's keys (so the error wins over a handler key of that name).
// md is the reply's own map (decoded for this reply alone), or nil.
func withServiceError(md map[string]string, text string) map[string]string {
	if md == nil {
		md = make(map[string]string, 1)
	}
	md[protocol.ServiceError] = text
	return md
}

// isReplyFrame reports whether msg is a reply frame.
func isReplyFrame(msg *codec.Message) bool {
	return msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodReply
}

// readCap is the most the reader reads of one message: what rpcx's own
// client reads (protocol.MaxMessageLength, unlimited by default), since a
// reply too large for a frame comes alone in a frame of its own
// (codec.MetaLargeReplies); never less than the frame cap. Every other
// message, and a reply frame holding more than one reply, is held to the
// frame cap once read.
func readCap(frameCap int) int {
	if n := protocol.MaxMessageLength; n > 0 {
		return max(n, frameCap)
	}
	return math.MaxUint32
}

// inflateReplies inflates the compressed replies of a reply frame of n
// bytes (codec's per-entry compression): within the frame cap in all, as
// the server fills a reply frame by what its replies unpack to; a reply
// alone in its frame, as far as rpcx's own client would read a response
// (readCap), since the server writes a reply too large for a frame so.
func inflateReplies(replies []codec.Reply, n, frameCap int) error {
	room := frameCap - n
	if len(replies) == 1 {
		room = max(room, readCap(frameCap))
	}
	for i := range replies {
		rp := &replies[i]
		if rp.CompressType == protocol.None {
			continue
		}
		was := len(rp.Payload)
		if err := codec.InflateReply(rp, room+was); err != nil {
			return err
		}
		room -= len(rp.Payload) - was
	}
	return nil
}
