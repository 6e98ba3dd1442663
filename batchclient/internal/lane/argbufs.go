package lane

// argBufs are the argument buffers of Call entries whose payloads the
// socket's owner has copied into a frame. A Call entry belongs to its
// caller until the reply comes; had it kept its buffer, ten thousand
// callers in flight would keep ten thousand buffers, each cold by the
// time its entry is recycled and encoded into again. Handed back here
// instead, a few of them serve every frame, and stay in cache.
//
// Only the socket's owner (the writer goroutine, or a caller writing its
// own frame: writerState) touches them, so they need no lock.
type argBufs struct {
	bufs  [][]byte
	bytes int // the capacity held in bufs
}

const (
	// maxArgBufs bounds the buffers kept: a frame's worth of entries
	// at the default BatchCap.
	maxArgBufs = 1024
	// maxArgBufBytes bounds the memory they hold.
	maxArgBufBytes = 256 << 10
)

// put keeps b, unless it is larger than a pooled entry keeps
// (maxKeptPayload) or the bounds are reached; then it is garbage.
func (a *argBufs) put(b []byte) {
	c := cap(b)
	if c == 0 || c > maxKeptPayload || len(a.bufs) >= maxArgBufs || a.bytes+c > maxArgBufBytes {
		return
	}
	a.bufs = append(a.bufs, b[:0])
	a.bytes += c
}

// get returns the buffer kept last, or nil when none is.
func (a *argBufs) get() []byte {
	n := len(a.bufs)
	if n == 0 {
		return nil
	}
	b := a.bufs[n-1]
	a.bufs[n-1] = nil
	a.bufs = a.bufs[:n-1]
	a.bytes -= cap(b)
	return b
}
