package codec

import (
	"fmt"

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
}

// AppendReplyHeader starts a reply frame of n replies, stamped with the
// server's incarnation; n calls to AppendReply must follow.
func AppendReplyHeader(dst []byte, incarnation uint64, n int) []byte {
	dst = mpack.AppendArrayLen(dst, 3)
	dst = mpack.AppendUint(dst, Version)
	dst = mpack.AppendUint(dst, incarnation)
	return mpack.AppendArrayLen(dst, n)
}

// AppendReply appends one reply to a frame started by AppendReplyHeader.
func AppendReply(dst []byte, rp *Reply) []byte {
	dst = mpack.AppendArrayLen(dst, 5)
	dst = mpack.AppendUint(dst, rp.ID)
	dst = mpack.AppendUint(dst, uint64(rp.Status))
	dst = mpack.AppendStr(dst, rp.Error)
	dst = appendStrMap(dst, rp.Metadata)
	return mpack.AppendBin(dst, rp.Payload)
}

// ReplySize is an upper bound of the bytes AppendReply writes for rp.
func ReplySize(rp *Reply) int {
	n := 1 + 9 + 2 + (5 + len(rp.Error)) + 5 + (5 + len(rp.Payload))
	for k, v := range rp.Metadata {
		n += 10 + len(k) + len(v)
	}
	return n
}

// DecodeReplies decodes a reply frame into dst (reused, grown as needed).
// Replies alias frame's bytes. A frame with more than maxEntries replies
// (when maxEntries > 0) is refused with ErrTooManyEntries.
func DecodeReplies(frame []byte, maxEntries int, dst []Reply) (incarnation uint64, replies []Reply, err error) {
	r := &reader{b: frame}
	if err = r.fixed("reply frame", 3); err != nil {
		return 0, nil, err
	}
	if err = checkVersion(r); err != nil {
		return 0, nil, err
	}
	if incarnation, err = r.uint("incarnation"); err != nil {
		return 0, nil, err
	}
	n, err := r.arrayLen("reply list")
	if err != nil {
		return 0, nil, err
	}
	if n > r.left()/minReplyBytes {
		return 0, nil, fmt.Errorf("%w: %d replies cannot fit in %d bytes", ErrMalformed, n, r.left())
	}
	if maxEntries > 0 && n > maxEntries {
		return 0, nil, fmt.Errorf("%w: %d replies, cap %d", ErrTooManyEntries, n, maxEntries)
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
	if err = r.fixed("reply", 5); err != nil {
		return err
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
	rp.Payload, err = r.bin("reply payload")
	return err
}
