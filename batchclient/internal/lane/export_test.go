package lane

// UnreadBytes exposes unreadBytes to the external tests.
var UnreadBytes = unreadBytes

// ByteWindowFit is how many entries of the given encoded sizes a lane's
// writer sends now as one frame, with a byte window of limit (0: none)
// and inflight bytes unanswered, under a frame cap of frameBytes.
func ByteWindowFit(limit, inflight int64, frameBytes int, sizes ...int) int {
	w := byteWindow{limit: limit}
	w.inflight.Store(inflight)
	out := make([]*entry, len(sizes))
	for i, s := range sizes {
		out[i] = &entry{size: s}
	}
	return w.fit(out, frameBytes)
}

// ByteWindowWriterWaits reports whether a lane's writer, holding one Call
// entry whose arguments it has not encoded yet (the byte window was full
// when it looked), waits for a credit, with a byte window of limit and
// inflight bytes unanswered now.
func ByteWindowWriterWaits(limit, inflight int64) bool {
	l := &Lane{frameBytes: 1 << 20, bw: byteWindow{limit: limit}}
	l.bw.inflight.Store(inflight)
	e := &entry{deferred: true, size: 100}
	n, again := l.fitWindow([]*entry{e})
	return n == 0 && !again && l.bw.stalled.Load()
}

// MaxBatchHeader is the most bytes a batch frame's header takes.
const MaxBatchHeader = maxBatchHeader
