package lane

// Hooks for tests and diagnostics: nothing on the production path calls
// these. They stay exported from this internal package, which no user can
// import, so that batchclient's tests (its export_test.go) reach them.

// SetCombining turns flat combining on or off for lanes made afterwards
// and reports whether it was on; a knob for tests (it is on by default),
// which set it back when they end.
func SetCombining(on bool) (was bool) { return combining.Swap(on) }

// CallerFrames is the count of frames the lane's callers wrote themselves
// (flat combining), for tests and diagnostics.
func (l *Lane) CallerFrames() int64 { return l.callerFrames.Load() }

// WriterFrames is the count of frames the lane's writer goroutine began,
// for tests and diagnostics: it counts a frame as it is built, so a frame
// the writer is still writing counts already.
func (l *Lane) WriterFrames() int64 { return l.writerFrames.Load() }

// PendingCalls is the count of calls waiting for their replies on the
// lane, for tests and diagnostics.
func (l *Lane) PendingCalls() int {
	n := 0
	for si := range l.pending.shards {
		s := &l.pending.shards[si]
		s.mu.Lock()
		n += s.waitingLocked()
		s.mu.Unlock()
	}
	return n
}

// Waiters reports the callers waiting for room in the queue and the
// entries queued, for tests and diagnostics.
func (l *Lane) Waiters() (waiting, queued int) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.waiting, len(l.queue)
}

// BytesInFlight reports the bytes of frames the lane has written and the
// server has not handed back.
func (l *Lane) BytesInFlight() int64 { return l.bw.inflight.Load() }
