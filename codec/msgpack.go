package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// Frames are written with internal/mpack (the payload codec's compiled
// plans use it too), and read by the reader
// below: the small subset the frames use (unsigned and signed integers,
// strings, binaries, maps and arrays), without reflection, every read
// bounds checked.

// appendInt appends v in the forms reader.int reads: the smallest down to
// -32 and int 64 below that, never int 8, 16 or 32, so that a frame this
// version writes is one every earlier version reads.
func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return mpack.AppendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v)) // negative fixint
	}
	// Written out, not mpack.Append64: that keeps appendInt inlined.
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendStrMap(b []byte, m map[string]string) []byte {
	return appendStrPairs(mpack.AppendMapLen(b, len(m)), m)
}

// appendStrPairs appends m's pairs, the map's header already written.
// Most entries and replies carry no metadata, and a range over an empty
// map still starts an iterator (as much as the rest of an entry's size
// sum, in profiles of the drop-in): an empty m costs a length check.
func appendStrPairs(b []byte, m map[string]string) []byte {
	if len(m) == 0 {
		return b
	}
	for k, v := range m {
		b = mpack.AppendStr(mpack.AppendStr(b, k), v)
	}
	return b
}

// strMapSize bounds the bytes appendStrPairs writes for m; an empty m is
// a length check, as there.
func strMapSize(m map[string]string) int {
	if len(m) == 0 {
		return 0
	}
	n := 0
	for k, v := range m {
		n += 10 + len(k) + len(v)
	}
	return n
}

// serverTimeoutKey is rpcx's share.ServerTimeout.
const serverTimeoutKey = "__ServerTimeout"

// serverTimeoutSize bounds the bytes of the pair appendServerTimeout adds:
// the key, and an int64 in decimal, each with a string header.
const serverTimeoutSize = 10 + len(serverTimeoutKey) + 20

// appendServerTimeout appends m with one more pair, rpcx's server timeout
// of micros (the time left) in whole milliseconds, as rpcx's XClient
// writes it; an expired deadline (micros < 0) is sent as -1.
func appendServerTimeout(b []byte, m map[string]string, micros int64) []byte {
	b = appendStrPairs(mpack.AppendMapLen(b, len(m)+1), m)
	b = append(b, serverTimeoutKeyEnc...)
	// The value is at most 20 characters: a fixstr, whose one header byte
	// is written once the digits are.
	at := len(b)
	b = appendServerTimeoutValue(append(b, 0), micros)
	b[at] = 0xa0 | byte(len(b)-at-1)
	return b
}

// serverTimeoutKeyEnc is serverTimeoutKey encoded, appended whole: every
// entry of the drop-in XClient's carries it.
var serverTimeoutKeyEnc = mpack.AppendStr(nil, serverTimeoutKey)

// isServerTimeoutValue reports whether raw is exactly what
// appendServerTimeoutValue writes for micros (> 0): its milliseconds in
// canonical decimal, no sign, no leading zero. It reads the digits rather
// than formatting the number to compare: every entry of the drop-in
// XClient's is checked.
func isServerTimeoutValue(raw []byte, micros int64) bool {
	if len(raw) == 0 || len(raw) > 18 || (raw[0] == '0' && len(raw) > 1) {
		return false
	}
	var ms int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
		ms = ms*10 + int64(c-'0')
	}
	return ms == micros/1000
}

// appendServerTimeoutValue appends the server timeout of micros in
// decimal milliseconds, -1 when micros < 0.
func appendServerTimeoutValue(b []byte, micros int64) []byte {
	ms := micros / 1000
	if micros < 0 {
		ms = -1
	}
	return strconv.AppendInt(b, ms, 10)
}

// entryMetadata reads an entry's metadata map. When its one pair is the
// server timeout, the value's bytes come back instead (raw, aliasing the
// frame), for the caller to check against the entry's timeout.
func (r *reader) entryMetadata() (m map[string]string, raw []byte, err error) {
	start := r.pos
	n, err := r.mapLen("metadata")
	if err != nil || n == 0 {
		return nil, nil, err
	}
	if n == 1 {
		k, err := r.strBytes("metadata")
		if err != nil {
			return nil, nil, err
		}
		if string(k) == serverTimeoutKey {
			v, err := r.strBytes("metadata")
			if err != nil {
				return nil, nil, err
			}
			return nil, v, nil
		}
	}
	r.pos = start
	m, err = r.strMap("metadata")
	return m, nil, err
}

// reader decodes msgpack values from a byte slice. Every method checks the
// bytes left before it reads or allocates, and returns ErrMalformed (wrapped
// with what was expected and where) when they do not suffice.
type reader struct {
	b   []byte
	pos int
}

func (r *reader) fail(what string) error {
	return fmt.Errorf("%w: bad %s at byte %d of %d", ErrMalformed, what, r.pos, len(r.b))
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) byte1() (byte, bool) {
	if r.pos >= len(r.b) {
		return 0, false
	}
	c := r.b[r.pos]
	r.pos++
	return c, true
}

// take returns the next n bytes without copying.
func (r *reader) take(n int) ([]byte, bool) {
	if n < 0 || n > r.left() {
		return nil, false
	}
	p := r.b[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return p, true
}

func (r *reader) be(n int) (uint64, bool) {
	p, ok := r.take(n)
	if !ok {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, true
}

func (r *reader) uint(what string) (uint64, error) {
	c, ok := r.byte1()
	if !ok {
		return 0, r.fail(what)
	}
	var v uint64
	switch {
	case c <= 0x7f:
		return uint64(c), nil
	case c == 0xcc:
		v, ok = r.be(1)
	case c == 0xcd:
		v, ok = r.be(2)
	case c == 0xce:
		v, ok = r.be(4)
	case c == 0xcf:
		v, ok = r.be(8)
	default:
		ok = false
	}
	if !ok {
		return 0, r.fail(what)
	}
	return v, nil
}

func (r *reader) int(what string) (int64, error) {
	if r.pos < len(r.b) {
		c := r.b[r.pos]
		switch {
		case c >= 0xe0:
			r.pos++
			return int64(int8(c)), nil
		case c == 0xd3:
			r.pos++
			v, ok := r.be(8)
			if !ok {
				return 0, r.fail(what)
			}
			return int64(v), nil
		}
	}
	v, err := r.uint(what)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt64 {
		return 0, r.fail(what)
	}
	return int64(v), nil
}

// length reads a type byte that must be one of the given family and returns
// the declared length, checked to be at most the bytes left divided by
// minItem (the fewest bytes an item takes).
func (r *reader) length(what string, fixBase, fixMask byte, b8, b16, b32 byte, minItem int) (int, error) {
	c, ok := r.byte1()
	if !ok {
		return 0, r.fail(what)
	}
	var n uint64
	switch {
	case fixMask != 0 && c&^fixMask == fixBase:
		n = uint64(c & fixMask)
	case b8 != 0 && c == b8:
		n, ok = r.be(1)
	case c == b16:
		n, ok = r.be(2)
	case c == b32:
		n, ok = r.be(4)
	default:
		ok = false
	}
	// A declared length is refused before anything is allocated for it when
	// the rest of the frame could not possibly hold it. Multiplied, not
	// divided (a division on every length read showed in profiles): n is
	// below 2^32 and minItem small, so the product cannot overflow.
	if !ok || n*uint64(minItem) > uint64(r.left()) {
		return 0, r.fail(what)
	}
	return int(n), nil
}

func (r *reader) arrayLen(what string) (int, error) {
	return r.length(what, 0x90, 0x0f, 0, 0xdc, 0xdd, 1)
}

func (r *reader) mapLen(what string) (int, error) {
	return r.length(what, 0x80, 0x0f, 0, 0xde, 0xdf, 2)
}

func (r *reader) strBytes(what string) ([]byte, error) {
	n, err := r.length(what, 0xa0, 0x1f, 0xd9, 0xda, 0xdb, 1)
	if err != nil {
		return nil, err
	}
	p, _ := r.take(n)
	return p, nil
}

func (r *reader) str(what string) (string, error) {
	p, err := r.strBytes(what)
	return string(p), err
}

// strAs reads a string, returning same itself when the bytes equal it.
func (r *reader) strAs(what, same string) (string, error) {
	p, err := r.strBytes(what)
	if err == nil && string(p) == same {
		return same, nil
	}
	return string(p), err
}

func (r *reader) bin(what string) ([]byte, error) {
	n, err := r.length(what, 0, 0, 0xc4, 0xc5, 0xc6, 1)
	if err != nil {
		return nil, err
	}
	p, _ := r.take(n)
	return p, nil
}

func (r *reader) strMap(what string) (map[string]string, error) {
	n, err := r.mapLen(what)
	if err != nil || n == 0 {
		return nil, err
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k, err := r.str(what)
		if err != nil {
			return nil, err
		}
		v, err := r.str(what)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// compressType reads a compress type: one rpcx knows a compressor for
// (protocol.Compressors), and not protocol.None (a field that is there
// says the payload is compressed).
func (r *reader) compressType(what string) (protocol.CompressType, error) {
	v, err := r.uint(what)
	if err != nil {
		return 0, err
	}
	if v == uint64(protocol.None) || v > 7 || protocol.Compressors[protocol.CompressType(v)] == nil {
		return 0, fmt.Errorf("%w: %s %d", ErrMalformed, what, v)
	}
	return protocol.CompressType(v), nil
}

// fixed reads an array header that must declare exactly n elements.
func (r *reader) fixed(what string, n int) error {
	got, err := r.arrayLen(what)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%w: %s has %d fields, want %d", ErrMalformed, what, got, n)
	}
	return nil
}
