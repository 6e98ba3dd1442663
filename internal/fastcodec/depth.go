package fastcodec

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxDepth is the deepest nesting of arrays and maps a msgpack payload may
// have to be decoded: Go's encoding/json refuses JSON nested deeper than
// this (its scanner's limit), and protobuf's default recursion limit is
// the same. The msgpack library has no limit: it decodes (and skips)
// nested values by recursion, so a payload of a few MiB nested millions
// deep overflows the decoding goroutine's stack, which kills the process
// (no recover catches a stack overflow).
const MaxDepth = 10000

// ErrTooDeep is returned, before any decoder sees the payload, for a
// msgpack payload nested deeper than MaxDepth.
var ErrTooDeep = errors.New("fastcodec: msgpack payload nested too deep")

// CheckDepth returns ErrTooDeep (wrapped) when data, a msgpack payload,
// nests arrays and maps deeper than MaxDepth. It walks the bytes without
// recursion, and only payloads longer than MaxDepth bytes (which a
// payload that deep must be); malformed or truncated input passes, for
// the decoder to report.
func CheckDepth(data []byte) error {
	if len(data) <= MaxDepth {
		return nil
	}
	if d := msgpackDepth(data, MaxDepth); d > MaxDepth {
		return fmt.Errorf("%w: more than %d levels of arrays and maps", ErrTooDeep, MaxDepth)
	}
	return nil
}

// msgpackDepth returns the deepest nesting of arrays and maps in the
// first msgpack value of b, counting no further than limit+1. It keeps,
// per open array or map, how many items it still holds: a stack of at
// most limit+1 counts, not the goroutine's.
func msgpackDepth(b []byte, limit int) int {
	left := []int{1} // the top level holds one value
	deepest := 0
	i := 0
	for len(left) > 0 {
		if i >= len(b) {
			return deepest // truncated: the decoder's to report
		}
		left[len(left)-1]--
		c := b[i]
		i++
		items, skip := 0, 0
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c&0xf0 == 0x80:
			items = 2 * int(c&0x0f)
		case c&0xf0 == 0x90:
			items = int(c & 0x0f)
		case c&0xe0 == 0xa0:
			skip = int(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin 8, str 8
			skip = 1 + int(at(b, i, 1))
		case c == 0xc5 || c == 0xda: // bin 16, str 16
			skip = 2 + int(at(b, i, 2))
		case c == 0xc6 || c == 0xdb: // bin 32, str 32
			skip = 4 + int(at(b, i, 4))
		case c == 0xc7: // ext 8
			skip = 2 + int(at(b, i, 1))
		case c == 0xc8: // ext 16
			skip = 3 + int(at(b, i, 2))
		case c == 0xc9: // ext 32
			skip = 5 + int(at(b, i, 4))
		case c == 0xca || c == 0xce || c == 0xd2: // float 32, uint 32, int 32
			skip = 4
		case c == 0xcb || c == 0xcf || c == 0xd3: // float 64, uint 64, int 64
			skip = 8
		case c == 0xcc || c == 0xd0:
			skip = 1
		case c == 0xcd || c == 0xd1:
			skip = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc || c == 0xdd: // array 16, 32
			n := 2 << (c - 0xdc)
			items, skip = int(at(b, i, n)), n
		case c == 0xde || c == 0xdf: // map 16, 32
			n := 2 << (c - 0xde)
			items, skip = 2*int(at(b, i, n)), n
		default: // 0xc1, never used
			return deepest
		}
		if skip < 0 || skip > len(b)-i {
			return deepest // overruns the payload: the decoder's to report
		}
		i += skip
		if items > 0 {
			left = append(left, items)
			if d := len(left) - 1; d > deepest {
				if deepest = d; deepest > limit {
					return deepest
				}
			}
		}
		for len(left) > 0 && left[len(left)-1] == 0 {
			left = left[:len(left)-1]
		}
	}
	return deepest
}

// at reads the big-endian unsigned integer of n bytes at b[i:], or -1
// when b is too short (an overrun, see msgpackDepth).
func at(b []byte, i, n int) int64 {
	if i+n > len(b) {
		return -1 << 40
	}
	switch n {
	case 1:
		return int64(b[i])
	case 2:
		return int64(binary.BigEndian.Uint16(b[i:]))
	}
	return int64(binary.BigEndian.Uint32(b[i:]))
}
