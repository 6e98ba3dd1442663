package lane

import (
	"sync/atomic"
	"time"
)

// How busy a lane is: what its peer reads to open another lane when this
// one cannot keep up, and to retire one when the pool has more than its
// load needs (batchclient's lane sizing).
//
// A lane's serial parts are its socket's owner (the writer goroutine, or
// a caller writing its own frame), which takes entries, encodes the
// arguments and writes, and on the server the connection's reader and
// reply writer, which do as much work per frame. The lane is saturated
// when one of them is the bottleneck:
//
//   - the socket's owner was busy for at least saturatedBusy of a window
//     of loadWindow or more, writing frames of saturatedEntries entries
//     or saturatedBytes bytes on average: the client's serial part is
//     near its limit, and with batches to share (a lane carrying one or
//     two entries a frame is not short of lanes but of callers; and a
//     machine short of CPU stretches a light lane's writes too);
//   - or the writer had entries queued that the server's window would not
//     let it write (unfinished entries at the window, or the byte window
//     full): the server holds as much of this lane as it takes.
//
// Either is reported on Config.Saturated, without blocking, at most once
// per window.

// loadWindow is the shortest span busy time is judged over.
const loadWindow = 5 * time.Millisecond

// saturatedBusy is the share of a window the socket's owner must have been
// busy for the lane to be saturated; saturatedEntries and saturatedBytes
// are the frames' mean size it must have written meanwhile, by either
// measure.
const (
	saturatedBusy    = 0.5
	saturatedEntries = 4
	saturatedBytes   = 64 << 10
)

// load is a lane's busy accounting; the socket's owner writes it.
type load struct {
	// busyNs is the total time the socket's owner spent flushing, read by
	// the peer (Busy) to judge the pool's use.
	busyNs atomic.Int64
	// windowStart and windowBusy are the current window's (socket owner
	// only).
	windowStart int64
	windowBusy  int64
	// windowFrames, windowEntries and windowBytes are what the window's
	// frames carried (appendFrame).
	windowFrames, windowEntries, windowBytes int
	// stalls counts the times the server's window held queued entries
	// back; the peer reads it beside busyNs.
	stalls atomic.Int64
}

// noteFlush records a flush by the socket's owner that ran from start to
// end (unix nanos) and reports the lane saturated when the window closed
// by it was busy enough.
func (l *Lane) noteFlush(start, end int64) {
	ld := &l.load
	d := end - start
	ld.busyNs.Add(d)
	if ld.windowStart == 0 {
		ld.windowStart = start
	}
	ld.windowBusy += d
	span := end - ld.windowStart
	if span < int64(loadWindow) {
		return
	}
	busy := float64(ld.windowBusy) / float64(span)
	frames, entries, bytes := ld.windowFrames, ld.windowEntries, ld.windowBytes
	ld.windowStart, ld.windowBusy = end, 0
	ld.windowFrames, ld.windowEntries, ld.windowBytes = 0, 0, 0
	if busy >= saturatedBusy && frames > 0 &&
		(entries >= saturatedEntries*frames || bytes >= saturatedBytes*frames) {
		l.saturated()
	}
}

// noteFrame records a frame of entries and bytes in the window (socket
// owner only).
func (l *Lane) noteFrame(entries, bytes int) {
	ld := &l.load
	ld.windowFrames++
	ld.windowEntries += entries
	ld.windowBytes += bytes
}

// noteStall records that the server's window (entries or bytes) held
// queued entries back, and reports the lane saturated.
func (l *Lane) noteStall() {
	l.load.stalls.Add(1)
	l.saturated()
}

// saturated tells the peer, without blocking, that this lane cannot keep
// up alone.
func (l *Lane) saturated() {
	if l.cfg.Saturated == nil {
		return
	}
	select {
	case l.cfg.Saturated <- struct{}{}:
	default:
	}
}

// PeakUnfinished reports the most entries the lane had unfinished at once
// since the last call (or since it began), and starts the next span at
// what it has now.
func (l *Lane) PeakUnfinished() int {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	peak := l.peakUnfinished
	l.peakUnfinished = l.unfinished
	return peak
}

// Busy reports the total time the lane's socket owner spent flushing and
// the times the server's window held entries back, both since the lane
// began: its peer compares two readings to judge how much of the pool
// its load uses.
func (l *Lane) Busy() (busy time.Duration, stalls int64) {
	return time.Duration(l.load.busyNs.Load()), l.load.stalls.Load()
}
