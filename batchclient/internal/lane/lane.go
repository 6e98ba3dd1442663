package lane

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Lane is one connection to a batch peer with one writer goroutine and
// one reader goroutine. Callers put entries on its queue; the writer ships
// whatever is queued the moment it has anything, as one frame with one
// write. A caller of Call that finds the lane quiet writes its frame
// itself (combine.go); the socket has one owner at a time.
type Lane struct {
	// Set by newLane and not changed after.
	cfg  Config // what the lane reads from its client (config.go)
	addr string // the address as the client's table knows it
	conn net.Conn
	hs   codec.Handshake
	// caps are the client's, lowered to the server's; window is the
	// entries the server lets the lane keep unfinished.
	batchCap, frameBytes, window int
	// combine says callers may write their own frames: only when
	// combining is on (the default; SetCombining, for tests) and not
	// over TLS, whose connection a write timeout breaks.
	combine bool
	wake    chan struct{} // cap 1: the queue went from empty to non-empty
	dead    chan struct{} // closed by fail, under qmu
	drained chan struct{} // closed when a draining lane has no call left (drain.go)
	pending *pendingTable // calls waiting for their replies (pending.go)

	// qmu guards the fields below, up to ws. They are one concern, what
	// may be written next and by whom: a caller admits an entry against
	// the lane's end, drain, retirement and room, and queues it, in one
	// critical section; the writer takes entries within the window and
	// claims the socket (wbusy) in one. Split, a call would take two or
	// three locks where it takes one.
	qmu   sync.Mutex
	queue []*entry
	// qBytes is the bytes queued; inWrite the bytes the writer took and
	// has not written yet (queue.go).
	qBytes, inWrite int
	// waiting counts callers blocked for room; room is closed (and
	// replaced) to wake them.
	waiting int
	room    chan struct{}
	// unfinished counts entries written and not yet answered (calls) or
	// credited back (casts, sends); the writer keeps it within window, the
	// server's bound on what one lane may make it hold. peakUnfinished
	// is its peak since PeakUnfinished last read it.
	unfinished, peakUnfinished int
	// wbusy says the socket has an owner: the writer goroutine or a
	// caller writing its own frame (combine.go).
	wbusy bool
	// deadErr is set before dead is closed; drainErr refuses entries once
	// the server said it shuts down (drain.go); retireErr once the peer
	// retires the lane (retire.go).
	deadErr, drainErr, retireErr error
	keyIndex, keyLanes           int // SetKeySlot
	// queuedTotal and nonCallTotal count the entries ever queued and the
	// casts and sends among them, takenTotal those the writer took,
	// writtenTotal those of them written (fences, retire.go).
	queuedTotal, nonCallTotal uint64
	takenTotal, writtenTotal  uint64

	// ws is the socket owner's (wbusy's holder), used by no one else.
	ws writerState

	// Atomics, read without qmu. qLen (len(queue)) and qBytesNow
	// (qBytes+inWrite, for admit's lock-free check) are written only
	// under qmu, so they never disagree with it for longer than one
	// critical section.
	qLen      atomic.Int32
	qBytesNow atomic.Int64
	// reserved counts places admit gave callers that have not yet queued
	// their entry (they are encoding it) nor given the place back;
	// resBytes is the bytes those places stand for (queue.go); lastSize
	// is the size of the entry last queued, admit's guess for the next.
	reserved           atomic.Int32
	resBytes, lastSize atomic.Int64
	// payloadHint is the size of the payload last encoded: what a fresh
	// entry's buffer starts with (entry.go).
	payloadHint atomic.Int64
	bw          byteWindow // the byte window (bytewindow.go)
	// callerFrames counts the frames callers wrote themselves,
	// writerFrames those the writer goroutine began (counted as each is
	// built, before its write).
	callerFrames, writerFrames atomic.Int64
	lastRecv                   atomic.Int64  // unix nanos of the last bytes read
	lastTraffic                atomic.Int64  // see LastTraffic (liveness.go)
	lastSent                   atomic.Int64  // unix nanos of the last complete write
	owedSince, owedWritten     atomic.Int64  // see liveness.go
	draining                   atomic.Bool   // the server said it shuts down (drain.go)
	retired                    atomic.Bool   // retireErr is set (admit's lock-free refusal)
	credited                   atomic.Uint64 // casts and sends the server credited back (the reader's)

	drainedOnce sync.Once
	// wg counts the writer and the reader; Close waits for them.
	wg sync.WaitGroup

	load load // how busy the lane is (load.go)
}

// New starts a lane on conn, a connection to addr that has passed the
// handshake hs: its writer and reader goroutines run until the lane
// fails (Close, or the connection's loss).
func New(cfg Config, addr string, conn net.Conn, hs codec.Handshake) *Lane {
	l := newLane(cfg, addr, conn, hs)
	l.wg.Add(2)
	go l.writeLoop()
	go l.readLoop()
	return l
}

// newLane is New without its goroutines.
func newLane(cfg Config, addr string, conn net.Conn, hs codec.Handshake) *Lane {
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
	_, isTLS := conn.(*tls.Conn)
	l.combine = combining.Load() && !isTLS
	l.lastRecv.Store(time.Now().UnixNano())
	l.lastSent.Store(time.Now().UnixNano())
	l.lastTraffic.Store(time.Now().UnixNano())
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

// wokenCallers is the client's count of woken callers, as settle.Settle
// reads it.
func (l *Lane) wokenCallers() int { return int(l.cfg.Woken.Load()) }
