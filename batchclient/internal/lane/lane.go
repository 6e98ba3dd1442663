package lane

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/settle"
	"github.com/rpcxbatch/rpcxbatch/internal/stackpad"
)

// entry is one queued request: the wire entry plus what the writer needs to
// finish it (the caller's deadline, to send the time left) and its encoded
// size for the queue's byte accounting.
type entry struct {
	codec.Entry
	deadline time.Time
	size     int
	// buf is the payload's storage, kept with the pooled entry so that
	// the next entry encodes into it without allocating.
	buf []byte

	// A synchronous Call's arguments are encoded by the lane's writer, not
	// by the caller (see Client.Call): deferred is set, args holds them
	// until then, and argState hands them over between the two. Such an
	// entry belongs to its caller, who returns it to the pool.
	deferred bool
	args     any
	argState atomic.Int32
}

// States of a deferred entry's arguments (entry.argState).
const (
	argsQueued    int32 = iota // not yet taken by the writer
	argsEncoding               // the writer is encoding them
	argsWithdrawn              // the caller returned first; the writer drops the entry
	argsEncoded                // encoded: the caller's arguments are free again
	argsDone                   // the writer is done with the entry
)

// withdraw is called by a deferred entry's caller when its call is over,
// however it ended. It returns once the writer no longer reads the
// arguments, and recycles the entry when the writer is done with it too.
func (e *entry) withdraw() {
	if e.argState.CompareAndSwap(argsQueued, argsWithdrawn) {
		return // the writer will drop it; it is garbage then
	}
	for e.argState.Load() == argsEncoding {
		// Encoding takes microseconds; this only happens when the call
		// ended (context, lost lane) in the middle of it.
		runtime.Gosched()
	}
	if e.argState.Load() == argsDone {
		putEntry(e)
	}
}

// maxKeptPayload is the largest payload buffer a pooled entry keeps: under
// overload every queued entry returns one to the pool, and large ones
// would make the pool hold payload-sized memory per caller.
const maxKeptPayload = 4 << 10

// lane is one connection to a batch peer with exactly one writer goroutine
// (the only path to the socket) and one reader goroutine. Callers put
// entries on its queue; the writer ships whatever is queued the moment it
// has anything, as one frame with one write.
type Lane struct {
	cfg  Config // what the lane reads from its client (laneconfig.go)
	addr string // the address as the client's table knows it
	conn net.Conn
	hs   codec.Handshake
	// caps are the client's, lowered to the server's.
	batchCap, frameBytes int

	// qmu guards the queue and the writer's window: queue, qBytes,
	// inWrite, waiting, unfinished, room (closed and replaced under it),
	// deadErr with the closing of dead, and drainErr. qLen and qBytesNow
	// are written only under it, so they never disagree with what it
	// guards for longer than one critical section; the byte window (bw),
	// reserved, resBytes and lastSize are atomics of their own.
	qmu  sync.Mutex
	qLen atomic.Int32 // len(queue), readable without qmu
	// qBytesNow mirrors qBytes+inWrite for admit's lock-free check.
	qBytesNow atomic.Int64
	// waiting counts callers blocked for room (under qmu).
	waiting int
	// reserved counts places admit gave callers that have not yet queued
	// their entry (they are encoding it) nor given the place back.
	reserved atomic.Int32
	// resBytes is the bytes those places stand for (admit.go); lastSize
	// is the size of the entry last queued, admit's guess for the next.
	resBytes, lastSize atomic.Int64
	// unfinished counts entries written and not yet answered (calls) or
	// credited back (casts, sends); the writer keeps it within window, the
	// server's bound on what one lane may make it hold.
	unfinished int
	window     int
	bw         byteWindow // the byte window (bytewindow.go)
	queue      []*entry
	qBytes     int
	inWrite    int           // bytes the writer took and has not written yet (admit.go)
	room       chan struct{} // closed (and replaced) to wake callers waiting for room
	wake       chan struct{} // cap 1: the queue went from empty to non-empty
	dead       chan struct{} // closed by fail
	deadErr    error         // set before dead is closed

	pending pendingTable // calls waiting for their replies (pending.go)

	lastRecv atomic.Int64 // unix nanos of the last bytes read
	lastSent atomic.Int64 // unix nanos of the last complete write
	// owedSince, owedWritten: see liveness.go.
	owedSince, owedWritten atomic.Int64
	wg                     sync.WaitGroup

	// Draining (see drain.go): drainErr (under qmu) refuses entries once
	// the server said it is shutting down; drained is closed when no call
	// waits for a reply any more.
	drainErr    error
	draining    atomic.Bool
	drained     chan struct{}
	drainedOnce sync.Once
}

// New starts a lane on conn, a connection to addr that has passed the
// handshake hs: its writer and reader goroutines run until the lane
// fails (Close, or the connection's loss).
func New(cfg Config, addr string, conn net.Conn, hs codec.Handshake) *Lane {
	l := &Lane{
		cfg: cfg, addr: addr, conn: conn, hs: hs,
		batchCap:   min(cfg.BatchCap, hs.BatchCap),
		frameBytes: min(cfg.MaxFrameBytes, hs.MaxFrameBytes),
		window:     hs.Window,
		bw:         byteWindow{limit: int64(hs.WindowBytes)},
		room:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		dead:       make(chan struct{}),
		drained:    make(chan struct{}),
		pending:    newPendingTable(),
	}
	l.lastRecv.Store(time.Now().UnixNano())
	l.lastSent.Store(time.Now().UnixNano())
	l.wg.Add(2)
	go l.writeLoop()
	go l.readLoop()
	return l
}

// fail closes the lane once: the connection is closed (which ends the
// reader), the writer stops, and every queued or pending call gets err.
func (l *Lane) fail(err error) {
	l.qmu.Lock()
	select {
	case <-l.dead:
		l.qmu.Unlock()
		return
	default:
	}
	l.deadErr = err
	close(l.dead)
	select {
	case l.cfg.Down <- struct{}{}:
	default:
	}
	queued := l.queue
	l.queue, l.qBytes = nil, 0
	l.qLen.Store(0)
	l.qBytesNow.Store(0)
	l.qmu.Unlock()
	l.conn.Close()

	l.cfg.Metrics.ErrConn.Inc(int64(len(queued)))
	l.failQueued(queued, err)
	pending := l.pending.takeAll()
	l.cfg.Metrics.ErrConn.Inc(int64(len(pending)))
	for _, call := range pending {
		l.Finish(call, err)
	}
}

// Close fails the lane with err (its queued and pending calls get err)
// and waits for its goroutines to end.
func (l *Lane) Close(err error) {
	l.fail(err)
	l.wg.Wait()
}

// Conn is the lane's connection.
func (l *Lane) Conn() net.Conn { return l.conn }

// Handshake is what the server answered the lane's handshake.
func (l *Lane) Handshake() codec.Handshake { return l.hs }

// Dead is closed when the lane has failed; Err then says why.
func (l *Lane) Dead() <-chan struct{} { return l.dead }

// Err is the error the lane failed with, nil while it lives.
func (l *Lane) Err() error {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.deadErr
}

// Draining reports whether the server told the lane it shuts down.
func (l *Lane) Draining() bool { return l.draining.Load() }

// Drained is closed once a draining lane has no call left waiting for
// its reply.
func (l *Lane) Drained() <-chan struct{} { return l.drained }

// Waiters reports the callers waiting for room in the queue and the
// entries queued, for tests and diagnostics.
func (l *Lane) Waiters() (waiting, queued int) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.waiting, len(l.queue)
}

// Pending is a call waiting for its reply.
type Pending struct {
	// Call is the rpcx call: its service, method and arguments go out,
	// its Reply, Error and ResMetadata come back, and it is sent on its
	// Done channel when it completes.
	Call *client.Call
	// stopWatch, when set (Watch), unregisters the context watch of a
	// call made with Go.
	stopWatch func() bool
	// DeferDecode says the caller waits for the call and can decode the
	// reply itself (Call does). The reader then decodes only small replies,
	// whose bytes it has just read and which take it a moment; a larger
	// one it copies into Raw and sets Undecoded, and the caller decodes it
	// on its own goroutine, so one big reply does not hold up the lane's
	// other replies.
	DeferDecode bool
	Undecoded   bool
	Raw         []byte
}

// maxReaderDecode is the largest reply the reader decodes itself for a
// caller that could decode it (see Pending.DeferDecode).
const maxReaderDecode = 4 << 10

// Finish completes pc, a call claimed from the lane, with err: its watch
// is stopped and it is sent on its Done channel.
func (l *Lane) Finish(pc *Pending, err error) {
	if pc.stopWatch != nil {
		pc.stopWatch()
	}
	call := pc.Call
	call.Error = err
	if pc.DeferDecode {
		// A caller of Call is about to run (see Client.woken); counted
		// before it can be, so the count never goes below zero.
		l.cfg.Woken.Add(1)
	}
	if !Deliver(call) && pc.DeferDecode {
		l.cfg.Woken.Add(-1)
	}
}

// Deliver sends a completed call on its Done channel and reports whether
// it had room. rpcx's rule: a Done channel with no room is the caller's
// bug, and rpcx says so in the same words.
func Deliver(call *client.Call) bool {
	select {
	case call.Done <- call:
		return true
	default:
		log.Debug("rpc: discarding Call reply due to insufficient Done chan capacity")
		return false
	}
}

// register gives call an id and records it as pending.
func (l *Lane) register(call *Pending) uint64 {
	return l.pending.register(call)
}

// Claim removes and returns the pending call with id, or nil when it has
// already been claimed (by its reply, a cancel, or fail). Whoever claims
// a call completes it (Finish).
func (l *Lane) Claim(id uint64) *Pending {
	call := l.pending.claim(id)
	l.checkDrained()
	return call
}

// wakeLocked wakes every caller waiting for room; they check again.
func (l *Lane) wakeLocked() {
	close(l.room)
	l.room = make(chan struct{})
}

// roomLocked returns, with qmu held, once the queue has room for an entry
// of size bytes (an entry larger than QueueBytes fits an empty queue); or
// it fails with qmu released: the lane's error, ErrOverloaded (fail-fast
// policy), or the context's error (block policy).
func (l *Lane) roomLocked(size int, done <-chan struct{}, ctxErr func() error) error {
	const own = 0 // the caller holds no place
	for {
		select {
		case <-l.dead:
			err := l.deadErr
			l.qmu.Unlock()
			return err
		default:
		}
		if err := l.drainErr; err != nil {
			l.qmu.Unlock()
			return err
		}
		if l.hasRoomLocked(size, own) {
			return nil
		}
		if l.cfg.FailFast {
			l.qmu.Unlock()
			l.cfg.Metrics.ErrOverload.Inc(1)
			return ErrOverloaded
		}
		room := l.room
		l.waiting++
		l.qmu.Unlock()
		select {
		case <-room:
		case <-done:
			l.qmu.Lock()
			l.waiting--
			l.qmu.Unlock()
			return ctxErr()
		case <-l.dead:
		}
		l.qmu.Lock()
		l.waiting--
	}
}

func (l *Lane) queued() int { return int(l.qLen.Load()) }

// wokenCallers is the client's count of woken callers, as settle.Settle
// reads it.
func (l *Lane) wokenCallers() int { return int(l.cfg.Woken.Load()) }

// release gives n places of the window back (answers and credits from the
// server) and wakes the writer if the window had stopped it.
func (l *Lane) release(n int) {
	l.qmu.Lock()
	stalled := l.unfinished >= l.window && len(l.queue) > 0
	l.unfinished = max(0, l.unfinished-n)
	l.qmu.Unlock()
	if stalled {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// take removes from the queue what fits one frame: at least one entry (when
// the window has room), at most batchCap, within frameBytes. It appends
// them to dst[:0], the writer's reused slice.
func (l *Lane) take(dst []*entry) []*entry {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	l.writtenLocked()
	if l.drainErr != nil {
		return nil // the server reads no more
	}
	n, size := 0, 0
	for n < len(l.queue) && n < l.batchCap && l.unfinished+n < l.window {
		size += l.queue[n].size
		if n > 0 && size > l.frameBytes {
			size -= l.queue[n].size
			break
		}
		n++
	}
	if n == 0 {
		return nil
	}
	// Anyone waiting for room may fit now (a large entry waits for bytes,
	// not for a full queue).
	full := l.waiting > 0
	batch := append(dst[:0], l.queue[:n]...)
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	l.qLen.Store(int32(rest))
	l.qBytes -= size
	l.inWrite = size
	l.qBytesNow.Store(int64(l.qBytes + l.inWrite))
	l.unfinished += n
	l.cfg.Metrics.QueueDepth.Update(int64(rest))
	if full {
		l.wakeLocked()
	}
	return batch
}

func (l *Lane) writeLoop() {
	defer l.wg.Done()
	var pad stackpad.Pad // see stackpad: no shrink and regrow between frames
	stackpad.Touch(&pad)
	defer stackpad.Touch(&pad)
	tick := time.NewTicker(l.tickEvery())
	defer tick.Stop()
	var (
		buf      []byte
		batch    []*entry
		out      []*entry // taken and encoded, waiting for the byte window
		frameSeq uint64
		fc       fastcodec.Codec // encodes the deferred arguments
	)
	for {
		select {
		case <-l.wake:
		case <-tick.C:
			if err := l.heartbeat(&buf); err != nil {
				l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
				return
			}
			continue
		case <-l.dead:
			return
		}
		settle.Settle(l.queued, l.batchCap, l.wokenCallers)
		for {
			if len(out) == 0 {
				if out = l.take(batch); len(out) == 0 {
					break
				}
				batch = out
			}
			if out = l.encodeDeferred(out, &fc, l.bw.room()); len(out) == 0 {
				continue
			}
			if l.draining.Load() {
				l.dropDraining(out)
				out = nil
				break
			}
			n, again := l.fitWindow(out)
			if again {
				continue
			}
			if n == 0 {
				break // a credit wakes the writer
			}
			var err error
			buf, err = l.writeFrames(buf[:0], &frameSeq, out[:n])
			out = out[n:]
			if err != nil {
				l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
				return
			}
			// A huge frame's buffer is not worth keeping.
			if cap(buf) > maxKeptFrame {
				buf = nil
			}
		}
	}
}

// encodeDeferred encodes the arguments of the batch's deferred entries,
// as far as budget bytes (the room left in the byte window: the entries
// after it stay as they are until the window has room), and returns the
// batch without those not to be sent: withdrawn by their callers, or
// failed to encode (their calls fail here). Their places in the window go
// back.
func (l *Lane) encodeDeferred(batch []*entry, fc *fastcodec.Codec, budget int64) []*entry {
	kept, dropped := batch[:0], 0
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
			dropped++ // withdrawn: the call is over, and e is its caller's
			continue
		}
		err := l.encodeDeferredArgs(e, fc)
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
			l.cfg.Metrics.ErrCodec.Inc(1)
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
func (l *Lane) encodeDeferredArgs(e *entry, fc *fastcodec.Codec) error {
	payload, err := encodeArgs(fc, e.buf[:0], l.cfg.SerializeType, e.args)
	if err != nil {
		return err
	}
	e.args = nil
	e.buf, e.Payload = payload, payload
	e.size = codec.EntrySize(&e.Entry)
	if e.size > l.frameBytes {
		return fmt.Errorf("%w: %d bytes, cap %d", ErrTooLarge, e.size, l.frameBytes)
	}
	return nil
}

// writeFrames writes batch with one Write, as one frame, or as several
// when its deferred arguments turned out bigger than take counted them.
func (l *Lane) writeFrames(buf []byte, frameSeq *uint64, batch []*entry) ([]byte, error) {
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
		buf = l.appendFrame(buf, *frameSeq, batch[:n])
		batch = batch[n:]
	}
	return buf, l.write(buf)
}

// appendFrame appends batch as one rpcx message and recycles its entries
// (a deferred entry goes back to its caller instead).
func (l *Lane) appendFrame(buf []byte, frameSeq uint64, batch []*entry) []byte {
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetOneway(true)
	h.SetSerializeType(protocol.SerializeNone)
	h.SetSeq(frameSeq)
	var meta map[string]string
	if token := l.cfg.Auth(); token != "" {
		meta = map[string]string{share.AuthKey: token}
	}
	buf, mark := codec.StartMessage(buf, &h, codec.ServicePath, codec.MethodBatch, meta)
	start := len(buf)
	buf = codec.AppendBatchHeader(buf, frameSeq, len(batch))
	now := time.Now()
	for i, e := range batch {
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
			// not keep a large encoding of its arguments alive.
			if cap(e.buf) > maxKeptPayload {
				e.buf, e.Payload = nil, nil
			}
			e.argState.Store(argsDone) // from here on e is its caller's
		} else {
			putEntry(e)
		}
		batch[i] = nil
	}
	codec.FinishMessage(buf, mark)
	l.charge(len(buf) - start) // the payload, as the server reads it
	buf = codec.CompressMessage(buf, mark, l.cfg.CompressType)
	l.cfg.Metrics.Frames.Inc(1)
	l.cfg.Metrics.BatchSize.Update(int64(len(batch)))
	return buf
}

// write writes b whole. Each attempt is bounded by HeartbeatTimeout, and a
// write that times out goes on while the peer takes bytes or is still
// heard from (replies, credits, heartbeats): a big frame to a busy peer may
// take long; a frozen peer owes an answer past HeartbeatTimeout (see
// liveness.go) and the write fails.
func (l *Lane) write(b []byte) error {
	for {
		start := time.Now()
		l.conn.SetWriteDeadline(start.Add(l.cfg.HeartbeatTimeout))
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

// heartbeat gives up on a peer that owes an answer past HeartbeatTimeout
// (liveness.go) and
// sends an rpcx heartbeat when it was quiet for HeartbeatInterval, or when
// the lane wrote nothing for long enough that the server's read timeout
// would cut it (sendDue).
func (l *Lane) heartbeat(buf *[]byte) error {
	if waited, frozen := l.frozenFor(); frozen {
		return fmt.Errorf("%w: nothing heard for %v after a write it had to answer", ErrHeartbeat, waited.Round(time.Millisecond))
	}
	quiet := time.Since(time.Unix(0, l.lastRecv.Load()))
	if quiet < l.cfg.HeartbeatInterval && !l.sendDue() {
		return nil
	}
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetHeartbeat(true)
	*buf = codec.AppendMessage((*buf)[:0], &h, "", "", nil, nil)
	return l.write(*buf)
}

func (l *Lane) readLoop() {
	defer l.wg.Done()
	var pad stackpad.Pad // see stackpad: no shrink and regrow between frames
	stackpad.Touch(&pad)
	defer stackpad.Touch(&pad)
	br := bufio.NewReaderSize(progressReader{l}, 64<<10)
	var (
		buf     []byte
		replies []codec.Reply
		pcs     []*Pending
		fc      fastcodec.Codec // decodes the replies
	)
	for {
		msg, b, err := codec.ReadMessage(br, l.cfg.MaxFrameBytes+64<<10, buf)
		if err != nil {
			l.fail(fmt.Errorf("%w: %w", ErrConnection, err))
			return
		}
		if cap(b) <= 4<<20 {
			buf = b
		}
		switch {
		case msg.Header.IsHeartbeat():
		case msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodReply:
			var inc uint64
			inc, replies, err = codec.DecodeReplies(msg.Payload, 0, replies)
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
			for i := range replies {
				if pcs[i] != nil {
					l.complete(&replies[i], pcs[i], &fc)
				}
				replies[i], pcs[i] = codec.Reply{}, nil
			}
			l.release(len(replies))
			l.checkDrained()
		case msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodCredit:
			inc, n, freed, err := codec.DecodeCreditBytes(msg.Payload)
			if err != nil {
				l.fail(fmt.Errorf("%w: bad credit message: %w", ErrConnection, err))
				return
			}
			if inc == l.hs.Incarnation {
				l.releaseBytes(freed)
				if n > 0 {
					l.release(int(min(n, uint64(l.window))))
				}
			}
		case msg.Header.MessageType() == protocol.Request && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodDrain:
			if err := l.onDrainNotice(msg.Payload); err != nil {
				l.fail(fmt.Errorf("%w: bad drain notice: %w", ErrConnection, err))
				return
			}
		case msg.Header.MessageType() == protocol.Response && msg.Header.MessageStatusType() == protocol.Error:
			// rpcx refused a frame (its AuthFunc, typically) and is about
			// to close the connection.
			l.fail(fmt.Errorf("%w: server refused a frame: %s", ErrConnection, msg.Metadata[protocol.ServiceError]))
			return
		case isPush(&msg):
			l.cfg.OnPush(&msg, l.dead) // a handler's Server.SendMessage (push.go)
		}
	}
}

// complete hands one reply to its claimed call, decoding the result into
// the call's reply value.
func (l *Lane) complete(rp *codec.Reply, pc *Pending, fc *fastcodec.Codec) {
	call := pc.Call
	if rp.Metadata != nil {
		call.ResMetadata = rp.Metadata
	}
	var err error
	switch {
	case rp.Status == codec.StatusError:
		err = ServiceError(rp.Error)
		call.ResMetadata = withServiceError(rp.Metadata, rp.Error)
	case pc.DeferDecode && len(rp.Payload) > maxReaderDecode:
		pc.Raw = append(pc.Raw[:0], rp.Payload...)
		pc.Undecoded = true
	case call.Reply != nil:
		err = DecodeReply(fc, l.cfg.SerializeType, rp.Payload, call.Reply, false)
	}
	if err != nil {
		l.cfg.Metrics.ErrService.Inc(1)
	}
	l.Finish(pc, err)
}

// ServiceError turns a server's error text into the error rpcx's own client
// would return for it, so callers see one error type on both paths.
func ServiceError(text string) error {
	if client.ClientErrorFunc != nil {
		res := protocol.NewMessage()
		res.Metadata = map[string]string{protocol.ServiceError: text}
		return client.ClientErrorFunc(res, text)
	}
	return client.NewServiceError(text)
}

var entryPool = sync.Pool{New: func() any { return new(entry) }}

func getEntry() *entry { return entryPool.Get().(*entry) }

// putEntry returns e to the pool once its payload has been copied into a
// frame (or it was never sent).
func putEntry(e *entry) {
	buf := e.buf
	*e = entry{}
	if cap(buf) <= maxKeptPayload {
		e.buf = buf[:0]
	}
	entryPool.Put(e)
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
