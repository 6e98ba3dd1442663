package lane

import (
	"bufio"
	"io"
)

// The reader's buffer follows the lane's traffic: a quiet lane reads
// through quietReadBuf bytes, a busy one through busyReadBuf (a large
// buffer saves read syscalls under load: with rpcx's 1 KiB reads a server
// made about one read for four messages). The reader grows it when a
// message leaves bytes behind in the buffer or does not fit it, and lets
// it go at a heartbeat, which flows only while the lane is quiet: an idle
// lane to each of many servers holds 4 KiB, not 64.
const (
	quietReadBuf = 4 << 10
	busyReadBuf  = 64 << 10
)

// grownReader returns a busyReadBuf reader of src that first reads what br
// has buffered.
func grownReader(br *bufio.Reader, src io.Reader) *bufio.Reader {
	n := br.Buffered()
	if n == 0 {
		return bufio.NewReaderSize(src, busyReadBuf)
	}
	rest, _ := br.Peek(n)
	return bufio.NewReaderSize(&prefixReader{pending: append([]byte(nil), rest...), src: src}, busyReadBuf)
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
		if len(r.pending) == 0 {
			r.pending = nil
		}
		return n, nil
	}
	return r.src.Read(b)
}
