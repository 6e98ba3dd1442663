package lane

import (
	"bufio"
	"io"
)

// The reader's buffer follows the lane's traffic: a quiet lane reads
// through quietReadBuf bytes, a busy one through busyReadBuf (a large
// buffer saves read syscalls under load). The reader grows it when a
// message leaves bytes behind in the buffer or does not fit it, and lets
// it go at the answer to one of its heartbeats, which a lane sends only
// when it has heard nothing for a while: an idle lane to each of many
// servers holds 4 KiB, not 64.
const (
	quietReadBuf = 4 << 10
	busyReadBuf  = 64 << 10
)

// readBuf is the reader's buffered view of the connection (the reader
// goroutine's alone).
type readBuf struct {
	src io.Reader
	br  *bufio.Reader
	big bool
	// prefix holds what the small buffer had read ahead when the big one
	// replaced it; the big one reads it first.
	prefix *prefixReader
}

func newReadBuf(src io.Reader) *readBuf {
	return &readBuf{src: src, br: bufio.NewReaderSize(src, quietReadBuf)}
}

// read notes a message of n bytes just read: a busy lane's buffer grows.
func (r *readBuf) read(n int) {
	if r.big || (r.br.Buffered() == 0 && n <= quietReadBuf) {
		return
	}
	if k := r.br.Buffered(); k > 0 {
		rest, _ := r.br.Peek(k)
		r.prefix = &prefixReader{pending: append([]byte(nil), rest...), src: r.src}
		r.br = bufio.NewReaderSize(r.prefix, busyReadBuf)
	} else {
		r.prefix, r.br = nil, bufio.NewReaderSize(r.src, busyReadBuf)
	}
	r.big = true
}

// quiet notes that the lane has been quiet: its buffer shrinks, unless it
// holds bytes not read yet (in the buffer, or left over from the small
// one before it).
func (r *readBuf) quiet() {
	if !r.big || r.br.Buffered() > 0 || (r.prefix != nil && len(r.prefix.pending) > 0) {
		return
	}
	r.prefix, r.br, r.big = nil, bufio.NewReaderSize(r.src, quietReadBuf), false
}

// prefixReader reads pending, then src.
type prefixReader struct {
	pending []byte
	src     io.Reader
}

func (r *prefixReader) Read(b []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(b, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	return r.src.Read(b)
}
