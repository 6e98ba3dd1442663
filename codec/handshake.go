package codec

import (
	"fmt"
	"time"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// Handshake is what a batch server tells a client lane before the lane sends
// any frame: the protocol it speaks, how many lanes it wants per client, its
// caps, and the incarnation it was started with.
type Handshake struct {
	Version uint64
	// PoolSize is the number of lanes the server asks each client to open.
	PoolSize int
	// BatchCap is the most entries the server accepts in one frame.
	BatchCap int
	// MaxFrameBytes is the largest frame the server accepts.
	MaxFrameBytes int
	// Incarnation is a random id drawn when the server started; a new value
	// at the same address means the server restarted.
	Incarnation uint64
	// Window is the most entries a lane may have unfinished on the server
	// (written, and neither answered nor credited back): the server's bound
	// on what one connection can make it hold.
	Window int
	// ReadTimeout is the rpcx server's read timeout (server.WithReadTimeout),
	// 0 when it has none: rpcx closes a connection it reads nothing from
	// for that long, so a lane must write more often. It travels in the
	// handshake response's metadata (MetaReadTimeout), not in the encoded
	// handshake, so servers and clients without it still understand each
	// other.
	ReadTimeout time.Duration
	// WindowBytes is the most bytes of batch frames a lane may have
	// unfinished on the server (see bytewindow.go), 0 when the server
	// grants no byte window. Like ReadTimeout it travels in the handshake
	// response's metadata (MetaWindowBytes).
	WindowBytes int
	// EntryCompress is the compress type the server reads compressed
	// entries of, protocol.None when it reads none (an older server, or a
	// lane that asked for none). Like ReadTimeout it travels in the
	// handshake response's metadata (MetaEntryCompress).
	EntryCompress protocol.CompressType
}

// MetaReadTimeout, in a handshake response's metadata, is the server's
// read timeout (Handshake.ReadTimeout) in Go's duration syntax.
const MetaReadTimeout = "rpcxbatch_read_timeout"

// handshakeFields is the length of the handshake array:
// [version, poolSize, batchCap, maxFrameBytes, incarnation, window].
const handshakeFields = 6

// AppendHandshake encodes h.
func AppendHandshake(dst []byte, h *Handshake) []byte {
	dst = mpack.AppendArrayLen(dst, handshakeFields)
	dst = mpack.AppendUint(dst, h.Version)
	dst = mpack.AppendUint(dst, uint64(h.PoolSize))
	dst = mpack.AppendUint(dst, uint64(h.BatchCap))
	dst = mpack.AppendUint(dst, uint64(h.MaxFrameBytes))
	dst = mpack.AppendUint(dst, h.Incarnation)
	return mpack.AppendUint(dst, uint64(h.Window))
}

// DecodeHandshake decodes a handshake and checks its version.
func DecodeHandshake(b []byte) (Handshake, error) {
	var h Handshake
	r := &reader{b: b}
	n, err := r.arrayLen("handshake")
	if err != nil {
		return h, err
	}
	// The version comes first and is checked before the field count, so a
	// newer server with more fields is reported as a version mismatch.
	if n > 0 {
		if h.Version, err = r.uint("handshake version"); err != nil {
			return h, err
		}
		if h.Version != Version {
			return h, fmt.Errorf("%w: server speaks %d, this client %d", ErrVersion, h.Version, Version)
		}
	}
	if n != handshakeFields {
		return h, fmt.Errorf("%w: handshake has %d fields, want %d", ErrMalformed, n, handshakeFields)
	}
	var ints [4]uint64
	for i := range ints[:3] {
		if ints[i], err = r.uint("handshake field"); err != nil {
			return h, err
		}
	}
	if h.Incarnation, err = r.uint("incarnation"); err != nil {
		return h, err
	}
	if ints[3], err = r.uint("window"); err != nil {
		return h, err
	}
	if r.left() != 0 {
		return h, fmt.Errorf("%w: %d trailing bytes after the handshake", ErrMalformed, r.left())
	}
	const maxInt = int(^uint(0) >> 1)
	for _, v := range ints {
		if v == 0 || v > uint64(maxInt) {
			return h, fmt.Errorf("%w: handshake field %d out of range", ErrMalformed, v)
		}
	}
	h.PoolSize, h.BatchCap, h.MaxFrameBytes, h.Window = int(ints[0]), int(ints[1]), int(ints[2]), int(ints[3])
	return h, nil
}

// MetaLargeReplies, in a handshake request's metadata ("1"), says that the
// lane reads a reply frame above its MaxFrameBytes when the frame holds a
// single reply: the server then writes a reply too large for a frame in a
// frame of its own, whatever its size, as rpcx writes a response of any
// size, instead of failing the call with a "reply exceeds the frame byte
// cap" error (which a server that does not know the key, or a client that
// does not send it, still gets).
const MetaLargeReplies = "rpcxbatch_large_replies"
