package codec

import (
	"fmt"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// A credit message hands window back to a lane: the server finished n more
// casts and sends (entries that get no reply) on that connection. It is the
// msgpack array [version, incarnation, n], sent as a server-pushed rpcx
// message to ServicePath.MethodCredit. Calls need no credit: their reply
// is one.

// AppendCredit encodes a credit of n entries.
func AppendCredit(dst []byte, incarnation uint64, n uint64) []byte {
	dst = mpack.AppendArrayLen(dst, 3)
	dst = mpack.AppendUint(dst, Version)
	dst = mpack.AppendUint(dst, incarnation)
	return mpack.AppendUint(dst, n)
}

// DecodeCredit decodes a credit message.
func DecodeCredit(b []byte) (incarnation, n uint64, err error) {
	r := &reader{b: b}
	if incarnation, err = r.head("credit", 3, "incarnation"); err != nil {
		return 0, 0, err
	}
	if n, err = r.uint("credit"); err != nil {
		return 0, 0, err
	}
	if r.left() != 0 {
		return 0, 0, fmt.Errorf("%w: %d trailing bytes after the credit", ErrMalformed, r.left())
	}
	return incarnation, n, nil
}
