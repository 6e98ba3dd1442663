package codec

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/smallnest/rpcx/protocol"
)

// CompressThreshold is the payload size above which rpcx v1.9.4 compresses
// a message when compression is on: its client compresses a request whose
// encoded arguments are larger (client.send: len(data) > 1024), its server
// a response to a compressed request (Server.sendResponse). Lanes apply it
// per entry and per reply, as rpcx per request and response (see below).
const CompressThreshold = 1024

// MetaCompress, in a handshake request's metadata, is the rpcx
// protocol.CompressType (as a decimal number) the client's lanes compress
// their frames with; the server then compresses the reply frames it writes
// on that connection the same way. A server that does not know the key
// ignores it and writes its reply frames uncompressed, which the lane reads
// as well.
const MetaCompress = "rpcxbatch_compress"

// gzipper is a gzip writer with its output buffer, pooled: a gzip.Writer
// holds over 800 KiB of state, which rpcx pools too (util.Zip). Not
// util.Zip itself: in rpcx v1.9.4 it returns a slice of a buffer it has
// already put back in its pool, which a concurrent caller may overwrite.
type gzipper struct {
	buf bytes.Buffer
	w   *gzip.Writer
}

var gzippers = sync.Pool{New: func() any {
	g := new(gzipper)
	// rpcx's level: util.Zip uses gzip.NewWriter, DefaultCompression.
	g.w = gzip.NewWriter(&g.buf)
	return g
}}

// CompressMessage compresses the payload of the message m marks, which
// must be the last thing in b and finished (FinishMessage), with ct, as
// rpcx's protocol.Message.Encode does for a message whose header carries
// ct: the header's compress type is set and the lengths patched, so every
// rpcx reader (rpcx's own server decodes it before any handler sees the
// payload) and ReadMessage get the original payload back. It leaves the
// message as it is when ct is None or unknown, when the payload is no
// larger than CompressThreshold, or when compressing does not make it
// smaller (incompressible data then costs no extra bytes on the wire).
//
// Lanes compress whole frames so only with a server older than entry
// compression (MetaEntryCompress), and a server so only the reply frames
// of a lane older than it.
func CompressMessage(b []byte, m MessageMark, ct protocol.CompressType) []byte {
	payload := b[m.payloadLen+4:]
	if ct == protocol.None || len(payload) <= CompressThreshold {
		return b
	}
	var out []byte
	err := withZipped(ct, payload, func(zipped []byte) {
		if len(zipped) >= len(payload) {
			return
		}
		out = append(b[:m.payloadLen+4], zipped...)
	})
	if err != nil || out == nil {
		return b
	}
	(*protocol.Header)(out[m.start : m.start+12]).SetCompressType(ct)
	FinishMessage(out, m)
	return out
}

// withZipped compresses p with ct and hands the result to fn, which must
// not keep it (gzip's comes from a pooled buffer).
func withZipped(ct protocol.CompressType, p []byte, fn func(zipped []byte)) error {
	if ct == protocol.Gzip {
		g := gzippers.Get().(*gzipper)
		defer gzippers.Put(g)
		g.buf.Reset()
		g.w.Reset(&g.buf)
		if _, err := g.w.Write(p); err != nil {
			return err
		}
		if err := g.w.Close(); err != nil {
			return err
		}
		fn(g.buf.Bytes())
		if g.buf.Cap() > 4<<20 {
			// A rare huge payload's buffer is not worth keeping.
			g.buf = bytes.Buffer{}
		}
		return nil
	}
	c := protocol.Compressors[ct]
	if c == nil {
		return fmt.Errorf("%w: %d", errNoCompressor, ct)
	}
	zipped, err := c.Zip(p)
	if err != nil {
		return err
	}
	fn(zipped)
	return nil
}

// errNoCompressor: rpcx's protocol.Compressors has none for the type.
var errNoCompressor = errors.New("codec: no compressor registered for the compress type")

// Compress returns p compressed with ct (as rpcx's compressor for ct
// writes it; gzip at rpcx's level), in a slice of its own.
func Compress(ct protocol.CompressType, p []byte) ([]byte, error) {
	var out []byte
	err := withZipped(ct, p, func(z []byte) { out = bytes.Clone(z) })
	return out, err
}

// Per-entry compression. rpcx compresses each request whose encoded
// arguments are larger than CompressThreshold, when the client's
// Option.CompressType is set, and the response to a compressed request
// when it is larger than the threshold; the server decompresses a request
// before any plugin sees it, and its hooks see the compress flag. Lanes do
// the same per entry: a lane compresses each entry's payload above the
// threshold (Entry.CompressType; the frame itself is not flagged
// compressed, so rpcx inflates nothing of it), the plugin inflates each
// entry itself through a limit (InflateEntries), and a reply to a
// compressed entry is compressed above the threshold (Reply.CompressType).
// A lane does so only with a server that said it reads such entries
// (MetaEntryCompress); with an older one it compresses whole frames
// (MetaCompress, CompressMessage).

// MetaEntryCompress, in a handshake request's metadata, is the rpcx
// protocol.CompressType (as a decimal number) the lane compresses entries
// with. A server that reads compressed entries, and has a compressor for
// that type, answers with the same key and value in the handshake
// response's metadata: the lane then compresses entries, not frames, and
// the server compresses the replies to compressed entries, not reply
// frames.
const MetaEntryCompress = "rpcxbatch_entry_compress"

// EntryCompressOf returns the compress type a handshake's metadata names
// under MetaEntryCompress, protocol.None when none or one rpcx has no
// compressor for.
func EntryCompressOf(meta map[string]string) protocol.CompressType {
	// An entry's compress type is at most 7, as the entries' decoder
	// takes it (reader.compressType).
	return compressNamed(meta[MetaEntryCompress], 7)
}

// FrameCompressOf returns the compress type a handshake's metadata names
// under MetaCompress (an older lane's whole-frame compression),
// protocol.None when none or one rpcx has no compressor for.
func FrameCompressOf(meta map[string]string) protocol.CompressType {
	return compressNamed(meta[MetaCompress], 0xff)
}

// compressNamed is the compress type v names as a decimal number from 1
// to most, protocol.None for any other v or a type rpcx has no compressor
// for.
func compressNamed(v string, most int) protocol.CompressType {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > most {
		return protocol.None
	}
	ct := protocol.CompressType(n)
	if protocol.Compressors[ct] == nil {
		return protocol.None
	}
	return ct
}

// InflateEntries inflates the payload of every compressed entry (its
// CompressType set) in place, through a limit: the frame's payload
// (frameBytes) plus what its entries gain in inflating may come to at
// most maxBytes, the same cap a frame has on the wire, so that a frame
// unpacks to no more than an uncompressed frame may weigh. It returns
// what the entries gained. A payload that does not inflate, or that
// would break the cap, is refused with ErrMalformed or ErrFrameTooLarge
// before more than the cap is allocated. The entries keep their
// CompressType (the flag rpcx's hooks see); their payloads are their own.
func InflateEntries(entries []Entry, frameBytes, maxBytes int) (gained int, err error) {
	for i := range entries {
		e := &entries[i]
		if e.CompressType == protocol.None {
			continue
		}
		room := maxBytes - frameBytes - gained + len(e.Payload)
		out, err := inflate(e.CompressType, e.Payload, room)
		if err != nil {
			return gained, err
		}
		gained += len(out) - len(e.Payload)
		e.Payload = out
	}
	return gained, nil
}

// InflateReply inflates a compressed reply's payload (its CompressType
// set), refusing one that unpacks to more than maxBytes with
// ErrFrameTooLarge. The reply keeps its CompressType; its payload is its
// own.
func InflateReply(rp *Reply, maxBytes int) error {
	if rp.CompressType == protocol.None {
		return nil
	}
	out, err := inflate(rp.CompressType, rp.Payload, maxBytes)
	if err != nil {
		return err
	}
	rp.Payload = out
	return nil
}

// maxDeflateRatio bounds what deflate data can unpack to, per byte.
const maxDeflateRatio = 1032

// inflate decompresses p, refusing a result beyond maxBytes: gzip is read
// through a limit, so no more than maxBytes (and a byte) is allocated;
// another registered compressor is checked after it ran.
func inflate(ct protocol.CompressType, p []byte, maxBytes int) ([]byte, error) {
	if maxBytes < 0 {
		maxBytes = 0
	}
	if ct == protocol.Gzip {
		zr, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		limit := int64(maxBytes)
		if limit < math.MaxInt64 {
			limit++ // one byte over the cap tells "too large" from "exactly the cap"
		}
		// gzip's trailer says what the data unpacks to (mod 4 GiB): a hint
		// for the buffer, within the limit, so that it is allocated once
		// rather than grown by doubling. The sender writes the trailer, and
		// a hostile one lies: the hint is held to what p can unpack to at
		// all (deflate's ratio is at most 1032 to 1).
		var out bytes.Buffer
		if len(p) >= 18 {
			// ReadFrom wants bytes.MinRead free before each read.
			out.Grow(int(min(int64(binary.LittleEndian.Uint32(p[len(p)-4:]))+1, limit, int64(len(p))*maxDeflateRatio, 64<<20)) + bytes.MinRead)
		}
		if _, err := out.ReadFrom(io.LimitReader(zr, limit)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if out.Len() > maxBytes {
			return nil, fmt.Errorf("%w: payload unpacks to more than %d bytes", ErrFrameTooLarge, maxBytes)
		}
		return out.Bytes(), nil
	}
	c := protocol.Compressors[ct]
	if c == nil {
		return nil, fmt.Errorf("%w: unknown compression %d", ErrMalformed, ct)
	}
	out, err := c.Unzip(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(out) > maxBytes {
		return nil, fmt.Errorf("%w: payload unpacks to more than %d bytes", ErrFrameTooLarge, maxBytes)
	}
	return out, nil
}
