package codec

import (
	"fmt"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// Version is the frame format version this package writes and reads.
const Version = 1

// The smallest encodings of an entry (array header, one byte per integer
// field, empty strings, map and bin) and of a reply.
const (
	minEntryBytes = 10
	minReplyBytes = 7
)

// Kind says what the server does with an entry.
type Kind uint8

const (
	// KindCall runs a service method and sends its reply back.
	KindCall Kind = 1
	// KindCast runs a service method and sends nothing back.
	KindCast Kind = 2
	// KindSend delivers the payload, in order per lane, to a send handler
	// the server registered by name (the entry's ServicePath).
	KindSend Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindCall:
		return "call"
	case KindCast:
		return "cast"
	case KindSend:
		return "send"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one request inside a batch frame.
type Entry struct {
	Kind Kind
	// ID matches a call's reply to the call; it is unique per lane among the
	// calls in flight. Casts and sends carry 0.
	ID            uint64
	ServicePath   string
	ServiceMethod string
	Metadata      map[string]string
	SerializeType uint8
	// ServerTimeout, set by an encoder, writes one more metadata pair
	// than Metadata holds: rpcx's "__ServerTimeout", the milliseconds of
	// TimeoutMicros, which rpcx's XClient puts in the metadata of every
	// call whose context has a deadline. The drop-in XClient's calls carry
	// it so instead of in a map made per call. Metadata must not hold the
	// key, and TimeoutMicros must be set (non-zero).
	//
	// Decoding sets it, and leaves Metadata nil, when that pair is an
	// entry's only metadata and its value is what an encoder writes for
	// the entry's TimeoutMicros (ServerTimeoutValue): the server then
	// makes the map only when someone asks for it. Any other metadata
	// decodes into Metadata, the pair with it.
	ServerTimeout bool
	// Payload is the already-encoded argument. Decoded entries alias the
	// frame's bytes.
	Payload []byte
	// TimeoutMicros is the time the caller had left when the entry was
	// encoded: 0 means no deadline, a negative value an expired one.
	TimeoutMicros int64
	// CompressType, when not protocol.None, says that Payload is
	// compressed with it, as rpcx compresses a request's payload (see
	// compress.go): such an entry has a ninth field, and goes only to a
	// server that said it reads them (MetaEntryCompress). InflateEntries
	// inflates it and keeps the flag, which the server's hooks see as
	// rpcx's do on a compressed request.
	CompressType protocol.CompressType
}

// AppendBatchHeader starts a batch frame of n entries with the given frame
// sequence number; n calls to AppendEntry must follow.
func AppendBatchHeader(dst []byte, frameSeq uint64, n int) []byte {
	return appendFrameHead(dst, frameSeq, n)
}

// appendFrameHead starts a batch or reply frame: its three fields, the
// version, the frame's number (sequence, incarnation) and the head of its
// list of n items.
func appendFrameHead(dst []byte, num uint64, n int) []byte {
	dst = mpack.AppendArrayLen(dst, 3)
	dst = mpack.AppendUint(dst, Version)
	dst = mpack.AppendUint(dst, num)
	return mpack.AppendArrayLen(dst, n)
}

// AppendEntry appends one entry to a batch frame started by AppendBatchHeader.
func AppendEntry(dst []byte, e *Entry) []byte {
	if e.CompressType != protocol.None {
		dst = mpack.AppendArrayLen(dst, 9)
	} else {
		dst = mpack.AppendArrayLen(dst, 8)
	}
	dst = mpack.AppendUint(dst, uint64(e.Kind))
	dst = mpack.AppendUint(dst, e.ID)
	dst = mpack.AppendStr(dst, e.ServicePath)
	dst = mpack.AppendStr(dst, e.ServiceMethod)
	if e.ServerTimeout {
		dst = appendServerTimeout(dst, e.Metadata, e.TimeoutMicros)
	} else {
		dst = appendStrMap(dst, e.Metadata)
	}
	dst = mpack.AppendUint(dst, uint64(e.SerializeType))
	dst = mpack.AppendBin(dst, e.Payload)
	dst = appendInt(dst, e.TimeoutMicros)
	if e.CompressType != protocol.None {
		dst = mpack.AppendUint(dst, uint64(e.CompressType))
	}
	return dst
}

// ServerTimeoutValue is the "__ServerTimeout" value an entry with
// ServerTimeout carries: TimeoutMicros in whole milliseconds, -1 when
// expired.
func (e *Entry) ServerTimeoutValue() string {
	return string(appendServerTimeoutValue(make([]byte, 0, 20), e.TimeoutMicros))
}

// EntrySize is an upper bound of the bytes AppendEntry writes for e, used to
// account queue bytes and byte caps without encoding twice.
func EntrySize(e *Entry) int {
	n := 1 + 9 + 9 + (5 + len(e.ServicePath)) + (5 + len(e.ServiceMethod)) + 5 + 2 + (5 + len(e.Payload)) + 9 + 2
	n += strMapSize(e.Metadata)
	if e.ServerTimeout {
		n += serverTimeoutSize
	}
	return n
}

// DecodeBatch decodes a batch frame. Entries alias frame's bytes, so frame
// must not be reused while they are in use. A frame with more than
// maxEntries entries (when maxEntries > 0) is refused with ErrTooManyEntries
// before its entries are decoded.
func DecodeBatch(frame []byte, maxEntries int) (frameSeq uint64, entries []Entry, err error) {
	return DecodeBatchTo(frame, maxEntries, nil)
}

// DecodeBatchTo is DecodeBatch with the entries decoded into a slice that
// room returns for their number, so that a server can reuse the slices
// of frames it is done with. room(n) returns a slice with room for at
// least n entries, or nil to have one made; its first n are cleared
// before they are decoded into. room is called once, after the frame's
// head and entry count passed their checks; a nil room makes every slice.
func DecodeBatchTo(frame []byte, maxEntries int, room func(n int) []Entry) (frameSeq uint64, entries []Entry, err error) {
	r := &reader{b: frame}
	if frameSeq, err = r.head("batch frame", 3, "frame sequence"); err != nil {
		return 0, nil, err
	}
	n, err := r.listLen("entry list", "entries", minEntryBytes, maxEntries)
	if err != nil {
		return 0, nil, err
	}
	if room != nil {
		entries = room(n)
	}
	if entries != nil && cap(entries) >= n {
		entries = entries[:n]
		clear(entries)
	} else {
		entries = make([]Entry, n)
	}
	var prev Entry
	for i := range entries {
		if err = decodeEntry(r, &entries[i], &prev); err != nil {
			return 0, nil, err
		}
		prev = entries[i]
	}
	if r.left() != 0 {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, r.left())
	}
	return frameSeq, entries, nil
}

// decodeEntry decodes one entry. The entries of a frame mostly name the
// same service and method: names equal to prev's share its strings rather
// than being allocated again.
func decodeEntry(r *reader, e *Entry, prev *Entry) (err error) {
	fields, err := r.arrayLen("entry")
	if err != nil {
		return err
	}
	if fields != 8 && fields != 9 {
		return fmt.Errorf("%w: entry has %d fields, want 8 or 9", ErrMalformed, fields)
	}
	kind, err := r.uint("entry kind")
	if err != nil {
		return err
	}
	if kind < uint64(KindCall) || kind > uint64(KindSend) {
		return fmt.Errorf("%w: unknown entry kind %d", ErrMalformed, kind)
	}
	e.Kind = Kind(kind)
	if e.ID, err = r.uint("entry id"); err != nil {
		return err
	}
	if e.ServicePath, err = r.strAs("service path", prev.ServicePath); err != nil {
		return err
	}
	if e.ServiceMethod, err = r.strAs("service method", prev.ServiceMethod); err != nil {
		return err
	}
	var timeoutRaw []byte
	if e.Metadata, timeoutRaw, err = r.entryMetadata(); err != nil {
		return err
	}
	st, err := r.uint("serialize type")
	if err != nil {
		return err
	}
	if st > 0xff {
		return fmt.Errorf("%w: serialize type %d", ErrMalformed, st)
	}
	e.SerializeType = uint8(st)
	if e.Payload, err = r.bin("payload"); err != nil {
		return err
	}
	if e.TimeoutMicros, err = r.int("timeout"); err != nil {
		return err
	}
	if fields == 9 {
		if e.CompressType, err = r.compressType("entry compress type"); err != nil {
			return err
		}
	}
	if timeoutRaw != nil {
		if e.TimeoutMicros > 0 && isServerTimeoutValue(timeoutRaw, e.TimeoutMicros) {
			e.ServerTimeout = true
		} else {
			e.Metadata = map[string]string{serverTimeoutKey: string(timeoutRaw)}
		}
	}
	return nil
}

// head reads what every frame and message of the protocol starts with: an
// array of fields items (what names it in errors), the protocol version
// (checkVersion), and the number after it (first names it: a frame's
// sequence, an incarnation).
func (r *reader) head(what string, fields int, first string) (uint64, error) {
	if err := r.fixed(what, fields); err != nil {
		return 0, err
	}
	if err := checkVersion(r); err != nil {
		return 0, err
	}
	return r.uint(first)
}

// listLen reads the length of a frame's list of items (list names it in
// errors, items its items). An encoded item takes at least minBytes: a
// count the rest of the frame cannot hold is refused before the caller
// allocates the items, and so is one over maxItems (when maxItems > 0),
// with ErrTooManyEntries.
func (r *reader) listLen(list, items string, minBytes, maxItems int) (int, error) {
	n, err := r.arrayLen(list)
	if err != nil {
		return 0, err
	}
	if n > r.left()/minBytes {
		return 0, fmt.Errorf("%w: %d %s cannot fit in %d bytes", ErrMalformed, n, items, r.left())
	}
	if maxItems > 0 && n > maxItems {
		return 0, fmt.Errorf("%w: %d %s, cap %d", ErrTooManyEntries, n, items, maxItems)
	}
	return n, nil
}

func checkVersion(r *reader) error {
	v, err := r.uint("version")
	if err != nil {
		return err
	}
	if v != Version {
		return fmt.Errorf("%w: got %d, this side speaks %d", ErrVersion, v, Version)
	}
	return nil
}
