package batchserver

import "sync"

// Reply payloads are encoded into buffers the connection recycles: the
// writer hands each one back once it has copied the payload into a reply
// frame, and the next call on the connection encodes into it. Without
// this, every reply allocated its payload twice (the encoder's buffer and
// the copy handed to the writer).
const (
	// maxKeptReplyBuf is the largest buffer kept for reuse; a rare large
	// reply's buffer is left to the collector.
	maxKeptReplyBuf = 4 << 10
	// maxKeptReplyBufs bounds the buffers one connection keeps.
	maxKeptReplyBufs = 4096
	// newReplyBufCap is the capacity of a fresh buffer before the
	// connection has written a reply: enough for a typical small reply
	// without growing. Later fresh buffers are sized by the replies.
	newReplyBufCap = 512
)

// replyBufs is a connection's free list of reply payload buffers.
type replyBufs struct {
	mu   sync.Mutex // guards free and recent: handlers get, the writer puts
	free [][]byte
	// recent is the largest payload of the last reply frame written: a
	// fresh buffer is made that size with some room, not newReplyBufCap,
	// whose room small replies left unused.
	recent int
}

// get returns an empty buffer to encode a reply into.
func (r *replyBufs) get() []byte {
	r.mu.Lock()
	if n := len(r.free); n > 0 {
		b := r.free[n-1]
		r.free[n-1] = nil
		r.free = r.free[:n-1]
		r.mu.Unlock()
		return b
	}
	n := r.recent
	r.mu.Unlock()
	return make([]byte, 0, freshReplyBufCap(n))
}

// freshReplyBufCap is the capacity of a fresh buffer when the last reply
// frame's largest payload was n bytes: n and an eighth, in 32-byte steps,
// at least 64 and at most maxKeptReplyBuf; newReplyBufCap before any.
func freshReplyBufCap(n int) int {
	if n == 0 {
		return newReplyBufCap
	}
	c := (n + n/8 + 31) &^ 31
	return min(max(c, 64), maxKeptReplyBuf)
}

// putPayloads takes back the payload buffers of replies the writer has
// copied into a frame.
func (r *replyBufs) putPayloads(payloads [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recent := 0
	for _, b := range payloads {
		recent = max(recent, len(b))
		if b != nil && cap(b) <= maxKeptReplyBuf && len(r.free) < maxKeptReplyBufs {
			r.free = append(r.free, b[:0])
		}
	}
	if recent > 0 {
		r.recent = recent
	}
}
