package lane

import (
	"sync/atomic"
	"time"
)

// How loaded a lane is, for its peer's lane sizing (docs/lanes.md). A
// lane's serial parts are its socket's owner and, on the server, the
// connection's reader and reply writer; the lane is saturated, reported
// on Config.Saturated without blocking, when one of them is the
// bottleneck or is about to be:
//
//   - its frames carried ShareEntries entries or more on average over a
//     window of loadWindow (and at least loadFrames frames): two lanes
//     would still batch well, and share the serial work of both sides;
//   - or the socket's owner was busy for saturatedBusy of the window, with
//     frames of saturatedEntries entries or saturatedBytes bytes on average;
//   - or the writer had entries queued that the server's window would not
//     let it write: the server holds as much of this lane as it takes.

// loadWindow is the shortest span a lane's frames are judged over, and
// loadFrames the fewest frames.
const (
	loadWindow = 5 * time.Millisecond
	loadFrames = 4
)

// ShareEntries is the mean entries a frame at which a lane counts as
// saturated; its peer retires a lane only when the pool's frames would
// stay below half of it with one lane fewer.
const ShareEntries = 16

// saturatedBusy is the share of a window the socket's owner must have been
// busy, with frames of saturatedEntries entries or saturatedBytes bytes on
// average, for the lane to be saturated by its writes.
const (
	saturatedBusy    = 0.5
	saturatedEntries = 4
	saturatedBytes   = 64 << 10
)

// load is a lane's load accounting; the socket's owner writes it.
type load struct {
	// busyNs is the total time the socket's owner spent flushing, frames
	// and entries the total it wrote, read by the peer (Load) to judge the
	// pool's use.
	busyNs, frames, entries atomic.Int64
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
// by it shows it.
func (l *Lane) noteFlush(start, end int64) {
	ld := &l.load
	d := end - start
	ld.busyNs.Add(d)
	if ld.windowStart == 0 {
		ld.windowStart = start
	}
	ld.windowBusy += d
	span := end - ld.windowStart
	if span < int64(loadWindow) || ld.windowFrames < loadFrames {
		return
	}
	busy := float64(ld.windowBusy) / float64(span)
	frames, entries, bytes := ld.windowFrames, ld.windowEntries, ld.windowBytes
	ld.windowStart, ld.windowBusy = end, 0
	ld.windowFrames, ld.windowEntries, ld.windowBytes = 0, 0, 0
	switch {
	case entries >= ShareEntries*frames:
		l.saturated()
	case busy >= saturatedBusy && (entries >= saturatedEntries*frames || bytes >= saturatedBytes*frames):
		l.saturated()
	}
}

// noteFrame records a frame of entries and bytes (socket owner only).
func (l *Lane) noteFrame(entries, bytes int) {
	ld := &l.load
	ld.windowFrames++
	ld.windowEntries += entries
	ld.windowBytes += bytes
	ld.frames.Add(1)
	ld.entries.Add(int64(entries))
	if l.cfg.IdleTimeout > 0 {
		l.lastTraffic.Store(time.Now().UnixNano())
	}
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

// Load is what a lane has done since it began, for its peer to compare
// two readings: the time its socket owner spent flushing, the frames and
// entries it wrote, and the times the server's window held entries back.
type Load struct {
	Busy            time.Duration
	Frames, Entries int64
	Stalls          int64
}

// Load reports what the lane has done since it began.
func (l *Lane) Load() Load {
	ld := &l.load
	return Load{Busy: time.Duration(ld.busyNs.Load()), Frames: ld.frames.Load(), Entries: ld.entries.Load(), Stalls: ld.stalls.Load()}
}
