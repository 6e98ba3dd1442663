package codec

import (
	"fmt"
	"strconv"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// The byte window. Besides the entries a lane may have unfinished on the
// server (Handshake.Window), a server may bound the bytes of batch frames a
// lane makes it hold: a frame's bytes (its rpcx payload, uncompressed) are
// held from its arrival until the last of its entries has finished, since
// the entries alias the frame. It is agreed in metadata, not in the encoded
// handshake, so that servers and clients without it still understand each
// other: a client that keeps within a byte window says so in its handshake
// request (MetaByteCredits); the server grants the window in its response
// (MetaWindowBytes; without it the lane bounds only entries); and to such
// a client the server hands bytes back in its credit messages
// (AppendCreditBytes), in the same write as the replies that finished the
// frames. Other clients get the three-field credit message they know.

// MetaByteCredits, in a handshake request's metadata, says that the lane
// keeps within the byte window the server grants and reads credit messages
// that hand bytes back (the value is "1").
const MetaByteCredits = "rpcxbatch_byte_credits"

// MetaWindowBytes, in a handshake response's metadata, is the byte window
// the server grants each lane (Handshake.WindowBytes), as a decimal number.
const MetaWindowBytes = "rpcxbatch_window_bytes"

// WindowBytesOf returns the byte window a handshake response's metadata
// grants, or 0 (none: the lane bounds only entries) when it grants none or
// the value is not a positive number.
func WindowBytesOf(meta map[string]string) int {
	n, err := strconv.Atoi(meta[MetaWindowBytes])
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// AppendCreditBytes encodes a credit of n entries and b bytes, the array
// [version, incarnation, n, b]: only for a lane that announced
// MetaByteCredits, since older clients read exactly three fields.
func AppendCreditBytes(dst []byte, incarnation, n, b uint64) []byte {
	dst = mpack.AppendArrayLen(dst, 4)
	dst = mpack.AppendUint(dst, Version)
	dst = mpack.AppendUint(dst, incarnation)
	dst = mpack.AppendUint(dst, n)
	return mpack.AppendUint(dst, b)
}

// DecodeCreditBytes decodes a credit message of either form: the entries
// and bytes it hands back (bytes is 0 for the three-field form).
func DecodeCreditBytes(b []byte) (incarnation, n, bytes uint64, err error) {
	r := &reader{b: b}
	fields, err := r.arrayLen("credit")
	if err != nil {
		return 0, 0, 0, err
	}
	if fields != 3 && fields != 4 {
		return 0, 0, 0, fmt.Errorf("%w: credit has %d fields, want 3 or 4", ErrMalformed, fields)
	}
	if err = checkVersion(r); err != nil {
		return 0, 0, 0, err
	}
	if incarnation, err = r.uint("incarnation"); err != nil {
		return 0, 0, 0, err
	}
	if n, err = r.uint("credit"); err != nil {
		return 0, 0, 0, err
	}
	if fields == 4 {
		if bytes, err = r.uint("byte credit"); err != nil {
			return 0, 0, 0, err
		}
	}
	if r.left() != 0 {
		return 0, 0, 0, fmt.Errorf("%w: %d trailing bytes after the credit", ErrMalformed, r.left())
	}
	return incarnation, n, bytes, nil
}
