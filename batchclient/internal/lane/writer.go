package lane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/settle"
	"github.com/rpcxbatch/rpcxbatch/internal/stackpad"
)

// The writer: the lane's one goroutine that writes to the socket. It
// takes what is queued into frames (within the entry window, the byte
// window and the frame cap), encodes the arguments of Call's entries,
// writes each batch with one Write, and sends the heartbeats
// (heartbeat.go).

// writerState is what the socket's owner writes with: the writer
// goroutine, or a caller writing its own frame (combine.go). Whoever holds
// the socket (Lane.wbusy) owns it; nobody else touches it.
type writerState struct {
	buf      []byte
	batch    []*entry
	out      []*entry // taken and encoded, waiting for the byte window
	frameSeq uint64
	fc       fastcodec.Codec // encodes the deferred arguments
	// rest is the unwritten end of a frame a caller began to write and
	// left to the writer goroutine (combine.go): the next bytes on the
	// socket, before anything else.
	rest []byte
	// argBufs holds the argument buffers of Call entries whose payloads
	// are in a frame already (argbufs.go), for the next ones to encode
	// into.
	argBufs argBufs
}

// writeLoop is the writer goroutine; it ends when the lane dies.
func (l *Lane) writeLoop() {
	defer l.wg.Done()
	var pad stackpad.Pad // see stackpad: no shrink and regrow between frames
	stackpad.Touch(&pad)
	defer stackpad.Touch(&pad)
	tick := time.NewTicker(l.tickEvery())
	defer tick.Stop()
	lastTick := time.Now()
	for {
		select {
		case <-l.wake:
		case <-tick.C:
			now := time.Now()
			if now.Sub(lastTick) > l.cfg.HeartbeatTimeout/2 {
				l.forgive(now)
			}
			lastTick = now
			if err := l.heartbeat(); err != nil {
				l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
				return
			}
			continue
		case <-l.dead:
			return
		}
		settle.Settle(l.queued, l.batchCap, l.wokenCallers)
		if !l.acquireSocket() {
			// A caller is writing; it wakes the writer when it lets go
			// with something left.
			continue
		}
		start := time.Now().UnixNano()
		err := l.flush(&l.ws, time.Time{}, -1)
		l.noteFlush(start, time.Now().UnixNano())
		l.releaseSocket()
		if err != nil {
			l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
			return
		}
	}
}

// flush writes what is queued, frame after frame, until the queue is
// empty or the windows stop it, or after frames frames (-1: no bound).
// Each frame is written whole when bound is zero, else by one attempt
// until bound (a caller's, combine.go; see write). The caller holds the
// socket.
func (l *Lane) flush(ws *writerState, bound time.Time, frames int) error {
	if err := l.writeRest(ws); err != nil {
		return err
	}
	for frames != 0 {
		if len(ws.out) == 0 {
			if ws.out = l.take(ws.batch); len(ws.out) == 0 {
				break
			}
			ws.batch = ws.out
		}
		if ws.out = l.encodeDeferred(ws, ws.out, l.bw.room()); len(ws.out) == 0 {
			continue
		}
		if l.draining.Load() {
			l.dropDraining(ws.out)
			ws.out = nil
			break
		}
		n, again := l.fitWindow(ws.out)
		if again {
			continue
		}
		if n == 0 {
			l.noteStall()
			break // a credit wakes the writer
		}
		var err error
		ws.buf, err = l.writeFrames(ws, ws.out[:n], bound)
		ws.out = ws.out[n:]
		if err != nil {
			return err
		}
		// A huge frame's buffer is not worth keeping.
		if cap(ws.buf) > maxKeptFrame {
			ws.buf = nil
		}
		frames--
	}
	return nil
}

// encodeDeferred encodes the arguments of the batch's deferred entries,
// as far as budget bytes (the room left in the byte window: the entries
// after it stay as they are until the window has room), and returns the
// batch without those not to be sent: withdrawn by their callers, or
// failed to encode (their calls fail here). Their places in the window go
// back. ws is the socket owner's: its codec and its argument buffers.
func (l *Lane) encodeDeferred(ws *writerState, batch []*entry, budget int64) []*entry {
	kept, dropped := batch[:0], 0
	// The codec is looked up once for the batch, at its first deferred
	// entry (a map access per entry otherwise).
	var cd fastcodec.Resolved
	resolved := false
	for _, e := range batch {
		if !e.deferred || budget <= 0 {
			kept = append(kept, e)
			budget -= int64(e.size)
			continue
		}
		if !e.argState.CompareAndSwap(argsQueued, argsEncoding) {
			if e.argState.Load() == argsEncoded {
				// Encoded before, and held back by the byte window.
				kept = append(kept, e)
				budget -= int64(e.size)
				continue
			}
			// Withdrawn: the call is over, and its caller has let go
			// of e (entry.withdraw).
			dropped++
			ws.argBufs.put(e.buf)
			e.buf, e.Payload = nil, nil
			putEntry(e)
			continue
		}
		if !resolved {
			cd, resolved = fastcodec.Resolve(l.cfg.SerializeType), true
		}
		err := l.encodeDeferredArgs(ws, e, cd)
		if err == nil {
			e.argState.Store(argsEncoded)
			kept = append(kept, e)
			budget -= int64(e.size)
			continue
		}
		dropped++
		id := e.ID
		e.argState.Store(argsDone) // from here on e is its caller's
		if pc := l.Claim(id); pc != nil {
			if errors.Is(err, fastcodec.ErrNoCodec) {
				// As Go and Cast fail on their callers' goroutines.
				err = ErrUnsupportedCodec
			} else {
				l.cfg.Metrics.ErrCodec.Inc(1)
			}
			l.Finish(pc, err)
		}
	}
	clear(batch[len(kept):])
	if dropped > 0 {
		l.release(dropped)
	}
	return kept
}

// encodeDeferredArgs encodes a deferred entry's arguments as its payload.
func (l *Lane) encodeDeferredArgs(ws *writerState, e *entry, cd fastcodec.Resolved) error {
	if cap(e.buf) == 0 {
		if e.buf = ws.argBufs.get(); e.buf == nil {
			e.buf = l.newPayloadBuf()
		}
	}
	payload, err := encodeArgs(&ws.fc, e.buf[:0], cd, e.args)
	if err != nil {
		return err
	}
	l.notePayload(len(payload))
	e.args = nil
	e.buf, e.Payload = payload, payload
	e.size = codec.EntrySize(&e.Entry)
	if e.size > l.frameBytes {
		return fmt.Errorf("%w: %d bytes, cap %d", ErrTooLarge, e.size, l.frameBytes)
	}
	l.compressEntry(e)
	return nil
}

// writeFrames writes batch with one Write, as one frame, or as several
// when its deferred arguments turned out bigger than take counted them.
func (l *Lane) writeFrames(ws *writerState, batch []*entry, bound time.Time) ([]byte, error) {
	buf, frameSeq := ws.buf[:0], &ws.frameSeq
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) {
			size += batch[n].size
			if n > 0 && size > l.frameBytes {
				break
			}
			n++
		}
		*frameSeq++
		if bound.IsZero() {
			l.writerFrames.Add(1) // only the writer goroutine writes unbounded
		}
		buf = l.appendFrame(ws, buf, *frameSeq, batch[:n])
		batch = batch[n:]
	}
	return buf, l.write(ws, buf, bound)
}

// appendFrame appends batch as one rpcx message and recycles its entries
// (a deferred entry goes back to its caller instead).
func (l *Lane) appendFrame(ws *writerState, buf []byte, frameSeq uint64, batch []*entry) []byte {
	h := codec.OnewayHeader(frameSeq)
	var meta map[string]string
	if token := l.cfg.Auth(); token != "" {
		meta = map[string]string{share.AuthKey: token}
	}
	buf, mark := codec.StartMessage(buf, &h, codec.ServicePath, codec.MethodBatch, meta)
	start := len(buf)
	buf = codec.AppendBatchHeader(buf, frameSeq, len(batch))
	now := time.Now()
	gain := 0
	for i, e := range batch {
		gain += e.gain
		// The time left travels, not the deadline: the two clocks differ.
		if !e.deadline.IsZero() {
			e.TimeoutMicros = int64(e.deadline.Sub(now) / time.Microsecond)
			if e.TimeoutMicros <= 0 {
				e.TimeoutMicros = -1
			}
		}
		buf = codec.AppendEntry(buf, &e.Entry)
		if e.deferred {
			// Copied into the frame: a caller waiting for its reply need
			// not keep the encoding of its arguments; the next Call entry
			// encodes into it while it is still in cache (argbufs.go).
			ws.argBufs.put(e.buf)
			e.buf, e.Payload = nil, nil
			e.argState.Store(argsDone) // from here on e is its caller's
		} else {
			putEntry(e)
		}
		batch[i] = nil
	}
	codec.FinishMessage(buf, mark)
	// The payload as the server counts it: its entries inflated.
	l.charge(len(buf) - start + gain)
	l.noteFrame(len(batch), len(buf)-start)
	if l.hs.EntryCompress == protocol.None {
		// A server older than entry compression: the frame is compressed
		// whole, if the lane compresses at all.
		buf = codec.CompressMessage(buf, mark, l.cfg.CompressType)
	}
	l.cfg.Metrics.Frames.Inc(1)
	l.cfg.Metrics.BatchSize.Update(int64(len(batch)))
	return buf
}

// writeRest writes the end of a frame that a caller began to write and
// left to the writer goroutine (ws.rest): the next bytes on the socket,
// before anything else. The caller holds the socket.
func (l *Lane) writeRest(ws *writerState) error {
	if len(ws.rest) == 0 {
		return nil
	}
	rest := ws.rest
	ws.rest = nil
	if err := l.write(ws, rest, time.Time{}); err != nil {
		return err
	}
	// Whoever wrote the end (the writer, or the heartbeat), the frame's
	// bytes no longer count against QueueBytes.
	l.qmu.Lock()
	l.writtenAllLocked(ws)
	l.qmu.Unlock()
	return nil
}

// writtenAllLocked notes that what the socket's owner took from the queue
// is on the wire (writtenLocked), unless some of it is not: a frame's end
// left to the writer (ws.rest), or entries held back for the byte window
// (ws.out). Called under qmu.
func (l *Lane) writtenAllLocked(ws *writerState) {
	if len(ws.rest) == 0 && len(ws.out) == 0 {
		l.writtenLocked()
	}
}

// write writes b; every write to the socket goes through it. With a zero
// bound b is written whole: each attempt is bounded by HeartbeatTimeout,
// and a write that times out goes on while the peer takes bytes or is
// still heard from (replies, credits, heartbeats): a big frame to a busy
// peer may take long; a frozen peer owes an answer past HeartbeatTimeout
// (see liveness.go) and the write fails. With a bound (a caller writing
// its own frame, combine.go) it is one attempt, for at most
// combineWriteBound and not past bound: what the socket did not take by
// then is left to the writer goroutine (ws.rest), and write returns
// errHandOff.
func (l *Lane) write(ws *writerState, b []byte, bound time.Time) error {
	for {
		start := time.Now()
		deadline := start.Add(l.cfg.HeartbeatTimeout)
		if !bound.IsZero() {
			deadline = start.Add(combineWriteBound)
			if bound.Before(deadline) {
				deadline = bound
			}
		}
		l.conn.SetWriteDeadline(deadline)
		n, err := l.conn.Write(b)
		b = b[n:]
		if n > 0 {
			l.owe(start.UnixNano())
		}
		if err == nil {
			l.lastSent.Store(time.Now().UnixNano())
			return nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
		if !bound.IsZero() {
			ws.rest = b
			return errHandOff
		}
		if n == 0 {
			// The peer took none of the bytes still pending for a whole
			// attempt: taking them is owed too. Without this, a peer that
			// answered during the last attempt that made progress and then
			// froze would never be judged frozen, and this writer, which
			// also runs the heartbeat check, would retry for ever.
			l.owe(start.UnixNano())
		}
		if _, frozen := l.frozenFor(); frozen && n == 0 {
			return err
		}
		if _, isTLS := l.conn.(*tls.Conn); isTLS {
			// A TLS connection fails for good at its first write error,
			// timeout included; retrying would only spin.
			return err
		}
	}
}
