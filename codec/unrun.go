package codec

import (
	"fmt"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// MethodUnrun tells a lane that calls it wrote were not run and never
// will be (server-pushed, oneway): a server that shuts down reads one
// last frame of each connection, and a frame read once the server may
// already have decided to close the connection is not run, lest its
// replies be lost with it. The client fails those calls with a retryable
// error.
//
// Its payload is the msgpack array [version, incarnation, [id, ...]]. A
// client that does not know the method ignores it, as it ignores every
// unknown server-pushed message: its calls then fail when the connection
// closes.
const MethodUnrun = "Unrun"

// AppendUnrun encodes an unrun notice for the calls ids.
func AppendUnrun(dst []byte, incarnation uint64, ids []uint64) []byte {
	dst = mpack.AppendArrayLen(dst, 3)
	dst = mpack.AppendUint(dst, Version)
	dst = mpack.AppendUint(dst, incarnation)
	dst = mpack.AppendArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = mpack.AppendUint(dst, id)
	}
	return dst
}

// DecodeUnrun decodes an unrun notice.
func DecodeUnrun(b []byte) (incarnation uint64, ids []uint64, err error) {
	r := &reader{b: b}
	if incarnation, err = r.head("unrun notice", 3, "incarnation"); err != nil {
		return 0, nil, err
	}
	n, err := r.listLen("unrun ids", "ids", 1, 0)
	if err != nil {
		return 0, nil, err
	}
	ids = make([]uint64, n)
	for i := range ids {
		if ids[i], err = r.uint("unrun id"); err != nil {
			return 0, nil, err
		}
	}
	if r.left() != 0 {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes after the unrun notice", ErrMalformed, r.left())
	}
	return incarnation, ids, nil
}
