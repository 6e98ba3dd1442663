package codec

import (
	"fmt"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// MethodDrain tells a lane that its server has begun a graceful shutdown
// (server-pushed, oneway): the server answers every entry it has read, and
// reads no more. The client stops writing to the connection, fails the
// entries it still holds with a retryable error, and waits for the replies
// of those it wrote. A server repeats the notice while it drains, so a lane
// waiting for slow handlers hears from it.
//
// Its payload is the msgpack array [version, incarnation]. A client that
// does not know the method ignores it, as it ignores every unknown
// server-pushed message.
const MethodDrain = "Drain"

// AppendDrain encodes a drain notice.
func AppendDrain(dst []byte, incarnation uint64) []byte {
	dst = mpack.AppendArrayLen(dst, 2)
	dst = mpack.AppendUint(dst, Version)
	return mpack.AppendUint(dst, incarnation)
}

// DecodeDrain decodes a drain notice.
func DecodeDrain(b []byte) (incarnation uint64, err error) {
	r := &reader{b: b}
	if incarnation, err = r.head("drain notice", 2, "incarnation"); err != nil {
		return 0, err
	}
	if r.left() != 0 {
		return 0, fmt.Errorf("%w: %d trailing bytes after the drain notice", ErrMalformed, r.left())
	}
	return incarnation, nil
}
