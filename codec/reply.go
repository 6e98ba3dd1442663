package codec

import (
	"fmt"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// Status says whether a reply carries a result or an error.
type Status uint8

const (
	// StatusOK marks a reply whose Payload is the encoded result.
	StatusOK Status = 0
	// StatusError marks a reply whose Error holds the error text; Payload
	// may still hold a reply the method filled in before failing.
	StatusError Status = 1
)

// Reply is the answer to one call entry.
type Reply struct {
	ID       uint64
	Status   Status
	Error    string
	Metadata map[string]string
	// Payload is the encoded reply; decoded replies alias the frame.
	Payload []byte
	// CompressType is the compress type of the entry the reply answers.
	// AppendReply compresses the payload with it as rpcx compresses the
	// response to a compressed request: when it is not protocol.None and
	// the payload is larger than CompressThreshold (the reply then has a
	// sixth field, the compress type). Decoding sets it only for such a
	// reply, whose Payload is then compressed (InflateReply).
	CompressType protocol.CompressType
}

// AppendReplyHeader starts a reply frame of n replies, stamped with the
// server's incarnation; n calls to AppendReply must follow.
func AppendReplyHeader(dst []byte, incarnation uint64, n int) []byte {
	return appendFrameHead(dst, incarnation, n)
}

// AppendReply appends one reply to a frame started by AppendReplyHeader.
// A reply whose payload is to be compressed (see Reply.CompressType) but
// whose compressor fails goes uncompressed.
func AppendReply(dst []byte, rp *Reply) []byte {
	payload, ct := rp.Payload, protocol.None
	if rp.CompressType != protocol.None && len(payload) > CompressThreshold {
		if z, err := Compress(rp.CompressType, payload); err == nil {
			payload, ct = z, rp.CompressType
		}
	}
	if ct != protocol.None {
		dst = mpack.AppendArrayLen(dst, 6)
	} else {
		dst = mpack.AppendArrayLen(dst, 5)
	}
	dst = mpack.AppendUint(dst, rp.ID)
	dst = mpack.AppendUint(dst, uint64(rp.Status))
	dst = mpack.AppendStr(dst, rp.Error)
	dst = appendStrMap(dst, rp.Metadata)
	dst = mpack.AppendBin(dst, payload)
	if ct != protocol.None {
		dst = mpack.AppendUint(dst, uint64(ct))
	}
	return dst
}

// ReplySize is an upper bound of the bytes AppendReply writes for rp.
func ReplySize(rp *Reply) int {
	n := 1 + 9 + 2 + (5 + len(rp.Error)) + 5 + (5 + len(rp.Payload)) + 2
	return n + strMapSize(rp.Metadata)
}

// DecodeReplies decodes a reply frame into dst (reused, grown as needed).
// Replies alias frame's bytes. A frame with more than maxEntries replies
// (when maxEntries > 0) is refused with ErrTooManyEntries.
func DecodeReplies(frame []byte, maxEntries int, dst []Reply) (incarnation uint64, replies []Reply, err error) {
	r := &reader{b: frame}
	if incarnation, err = r.head("reply frame", 3, "incarnation"); err != nil {
		return 0, nil, err
	}
	n, err := r.listLen("reply list", "replies", minReplyBytes, maxEntries)
	if err != nil {
		return 0, nil, err
	}
	if cap(dst) < n {
		dst = make([]Reply, n)
	}
	replies = dst[:n]
	for i := range replies {
		if err = decodeReply(r, &replies[i]); err != nil {
			return 0, nil, err
		}
	}
	if r.left() != 0 {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, r.left())
	}
	return incarnation, replies, nil
}

func decodeReply(r *reader, rp *Reply) (err error) {
	fields, err := r.arrayLen("reply")
	if err != nil {
		return err
	}
	if fields != 5 && fields != 6 {
		return fmt.Errorf("%w: reply has %d fields, want 5 or 6", ErrMalformed, fields)
	}
	if rp.ID, err = r.uint("reply id"); err != nil {
		return err
	}
	st, err := r.uint("reply status")
	if err != nil {
		return err
	}
	if st > uint64(StatusError) {
		return fmt.Errorf("%w: unknown reply status %d", ErrMalformed, st)
	}
	rp.Status = Status(st)
	if rp.Error, err = r.str("error text"); err != nil {
		return err
	}
	if rp.Metadata, err = r.strMap("reply metadata"); err != nil {
		return err
	}
	if rp.Payload, err = r.bin("reply payload"); err != nil {
		return err
	}
	rp.CompressType = protocol.None
	if fields == 6 {
		rp.CompressType, err = r.compressType("reply compress type")
	}
	return err
}
