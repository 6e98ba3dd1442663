package fastcodec

import (
	"encoding/binary"
	"math"
	"reflect"
	"unsafe"
)

// decode decodes the msgpack value at the start of data into the struct at
// base, as the library would, and reports whether it could. On false the
// caller decodes again with the library from the start: the plan stops at
// anything it does not handle exactly as the library (unknown field names,
// unexpected codes, truncated input), and the fields it had set by then
// are set again, to the same values, by the library's pass.
func (p *structPlan) decode(data []byte, base unsafe.Pointer) bool {
	_, ok := p.decodeAt(data, 0, base)
	return ok
}

func (p *structPlan) decodeAt(data []byte, pos int, base unsafe.Pointer) (int, bool) {
	if pos >= len(data) {
		return pos, false
	}
	c := data[pos]
	pos++
	var n int
	switch {
	case c == 0xc0:
		// A nil map leaves the struct zero.
		reflect.NewAt(p.typ, base).Elem().SetZero()
		return pos, true
	case c&0xf0 == 0x80:
		n = int(c & 0x0f)
	case c == 0xde && pos+2 <= len(data):
		n = int(binary.BigEndian.Uint16(data[pos:]))
		pos += 2
	case c == 0xdf && pos+4 <= len(data):
		n = int(binary.BigEndian.Uint32(data[pos:]))
		pos += 4
	default:
		return pos, false
	}
	for i := 0; i < n; i++ {
		// The library's encoder writes the fields in order, each name a
		// fixstr: the bytes at hand are compared with the i-th field's
		// key as written, in one word. They are that key exactly, so
		// reading and looking it up would find that field.
		if i < len(p.fields) {
			if f := &p.fields[i]; f.keyLen > 0 && f.keyLen <= len(data)-pos && packName(data[pos:pos+f.keyLen]) == f.keyWord {
				var ok bool
				if pos, ok = f.decodeValue(data, pos+f.keyLen, base); !ok {
					return pos, false
				}
				continue
			}
		}
		key, next, ok := readBytes(data, pos)
		if !ok {
			return pos, false
		}
		pos = next
		f := p.lookup(i, key)
		if f == nil {
			// A field this side does not have (a peer with a newer
			// version of the type): its value is skipped, as the
			// library skips it.
			if pos, ok = skip(data, pos, 0); !ok {
				return pos, false
			}
			continue
		}
		if pos, ok = f.decodeValue(data, pos, base); !ok {
			return pos, false
		}
	}
	return pos, true
}

// lookup finds the field named key, trying first the field the library's
// encoder would have written at index i.
func (p *structPlan) lookup(i int, key []byte) *fieldPlan {
	// A short key is packed once, and compared as a word with each name:
	// a string comparison calls memequal, costly on a payload of many
	// named fields.
	var word uint64
	if len(key) <= 8 {
		word = packName(key)
	}
	if i < len(p.fields) && p.fields[i].matches(key, word) {
		return &p.fields[i]
	}
	for j := range p.fields {
		if p.fields[j].matches(key, word) {
			return &p.fields[j]
		}
	}
	return nil
}

// matches reports whether key is the field's name; word is key packed
// by packName when key is at most 8 bytes long.
func (f *fieldPlan) matches(key []byte, word uint64) bool {
	if len(key) != len(f.name) {
		return false
	}
	if f.short {
		return word == f.word
	}
	return f.name == string(key)
}

// packName packs a name of at most 8 bytes into a word. Two names of the
// same length pack alike only if they are equal: the two loads together
// cover every byte (they overlap for lengths 3, 5, 6 and 7).
func packName(b []byte) uint64 {
	switch n := len(b); {
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
	case n >= 2:
		return uint64(binary.LittleEndian.Uint16(b)) | uint64(binary.LittleEndian.Uint16(b[n-2:]))<<16
	case n == 1:
		return uint64(b[0])
	}
	return 0
}

func (f *fieldPlan) decodeValue(data []byte, pos int, base unsafe.Pointer) (int, bool) {
	at := field(base, f.offset)
	switch f.kind {
	case reflect.Struct:
		return f.sub.decodeAt(data, pos, at)
	case reflect.String:
		if pos < len(data) && data[pos] == 0xc0 {
			*(*string)(at) = ""
			return pos + 1, true
		}
		b, next, ok := readBytes(data, pos)
		if ok {
			*(*string)(at) = string(b)
		}
		return next, ok
	}
	if pos >= len(data) {
		return pos, false
	}
	c := data[pos]
	pos++
	switch f.kind {
	case reflect.Bool:
		switch c {
		case 0xc0, 0xc2:
			*(*bool)(at) = false
		case 0xc3:
			*(*bool)(at) = true
		default:
			return pos, false
		}
		return pos, true
	case reflect.Float32:
		if c == 0xca {
			if pos+4 > len(data) {
				return pos, false
			}
			// Through float64, as the library's SetFloat: a signalling
			// NaN comes out quiet.
			*(*float32)(at) = float32(float64(math.Float32frombits(binary.BigEndian.Uint32(data[pos:]))))
			return pos + 4, true
		}
		n, next, ok := readInt(data, pos, c)
		if ok {
			*(*float32)(at) = float32(n)
		}
		return next, ok
	case reflect.Float64:
		switch c {
		case 0xca:
			if pos+4 > len(data) {
				return pos, false
			}
			*(*float64)(at) = float64(math.Float32frombits(binary.BigEndian.Uint32(data[pos:])))
			return pos + 4, true
		case 0xcb:
			if pos+8 > len(data) {
				return pos, false
			}
			*(*float64)(at) = math.Float64frombits(binary.BigEndian.Uint64(data[pos:]))
			return pos + 8, true
		}
		n, next, ok := readInt(data, pos, c)
		if ok {
			*(*float64)(at) = float64(n)
		}
		return next, ok
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, next, ok := readUint(data, pos, c)
		if !ok {
			return next, false
		}
		// Narrower fields keep the low bits, as reflect's SetUint does
		// for the library.
		switch f.kind {
		case reflect.Uint:
			*(*uint)(at) = uint(n)
		case reflect.Uint8:
			*(*uint8)(at) = uint8(n)
		case reflect.Uint16:
			*(*uint16)(at) = uint16(n)
		case reflect.Uint32:
			*(*uint32)(at) = uint32(n)
		default:
			*(*uint64)(at) = n
		}
		return next, true
	}
	n, next, ok := readInt(data, pos, c)
	if !ok {
		return next, false
	}
	switch f.kind {
	case reflect.Int:
		*(*int)(at) = int(n)
	case reflect.Int8:
		*(*int8)(at) = int8(n)
	case reflect.Int16:
		*(*int16)(at) = int16(n)
	case reflect.Int32:
		*(*int32)(at) = int32(n)
	default:
		*(*int64)(at) = n
	}
	return next, true
}

// readBytes reads a str or bin value, as the library's bytesLen accepts
// them for strings and field names (nil is left to the caller).
func readBytes(data []byte, pos int) ([]byte, int, bool) {
	if pos >= len(data) {
		return nil, pos, false
	}
	c := data[pos]
	pos++
	var n int
	switch {
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case (c == 0xd9 || c == 0xc4) && pos+1 <= len(data):
		n = int(data[pos])
		pos++
	case (c == 0xda || c == 0xc5) && pos+2 <= len(data):
		n = int(binary.BigEndian.Uint16(data[pos:]))
		pos += 2
	case (c == 0xdb || c == 0xc6) && pos+4 <= len(data):
		n = int(binary.BigEndian.Uint32(data[pos:]))
		pos += 4
	default:
		return nil, pos, false
	}
	if n > len(data)-pos {
		return nil, pos, false
	}
	return data[pos : pos+n], pos + n, true
}

// readInt reads the integer whose code c was just read, as the library's
// int(c) does.
func readInt(data []byte, pos int, c byte) (int64, int, bool) {
	switch {
	case c == 0xc0:
		return 0, pos, true
	case c <= 0x7f || c >= 0xe0:
		return int64(int8(c)), pos, true
	}
	size := intSize(c)
	if size == 0 || pos+size > len(data) {
		return 0, pos, false
	}
	b := data[pos:]
	switch c {
	case 0xcc:
		return int64(b[0]), pos + 1, true
	case 0xd0:
		return int64(int8(b[0])), pos + 1, true
	case 0xcd:
		return int64(binary.BigEndian.Uint16(b)), pos + 2, true
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(b))), pos + 2, true
	case 0xce:
		return int64(binary.BigEndian.Uint32(b)), pos + 4, true
	case 0xd2:
		return int64(int32(binary.BigEndian.Uint32(b))), pos + 4, true
	}
	return int64(binary.BigEndian.Uint64(b)), pos + 8, true
}

// readUint reads the integer whose code c was just read, as the library's
// uint(c) does: signed codes are sign-extended.
func readUint(data []byte, pos int, c byte) (uint64, int, bool) {
	if c == 0xcc || c == 0xcd || c == 0xce {
		if pos+intSize(c) > len(data) {
			return 0, pos, false
		}
		b := data[pos:]
		switch c {
		case 0xcc:
			return uint64(b[0]), pos + 1, true
		case 0xcd:
			return uint64(binary.BigEndian.Uint16(b)), pos + 2, true
		}
		return uint64(binary.BigEndian.Uint32(b)), pos + 4, true
	}
	n, next, ok := readInt(data, pos, c)
	return uint64(n), next, ok
}

// intSize is the payload size after an integer code, 0 if c is none.
func intSize(c byte) int {
	switch c {
	case 0xcc, 0xd0:
		return 1
	case 0xcd, 0xd1:
		return 2
	case 0xce, 0xd2:
		return 4
	case 0xcf, 0xd3:
		return 8
	}
	return 0
}

// maxSkipDepth bounds the nesting of a skipped value; deeper ones are left
// to the library.
const maxSkipDepth = 32

// skip steps over one well-formed msgpack value of any type at pos. It
// fails (and the library then decodes the whole input) on anything else:
// the unused code 0xc1, truncated input, nesting deeper than maxSkipDepth.
func skip(data []byte, pos, depth int) (int, bool) {
	if pos >= len(data) || depth > maxSkipDepth {
		return pos, false
	}
	c := data[pos]
	pos++
	n, count := 0, 0 // bytes to step over; values to skip after them
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
	case c&0xf0 == 0x80:
		count = 2 * int(c&0x0f)
	case c&0xf0 == 0x90:
		count = int(c & 0x0f)
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
	case intSize(c) > 0:
		n = intSize(c)
	case c == 0xca:
		n = 4
	case c == 0xcb:
		n = 8
	case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type byte and data
		n = 1 + 1<<(c-0xd4)
	default:
		var l, width int
		switch c {
		case 0xc4, 0xd9, 0xc7: // bin8, str8, ext8
			width = 1
		case 0xc5, 0xda, 0xc8, 0xdc, 0xde: // 16-bit lengths and counts
			width = 2
		case 0xc6, 0xdb, 0xc9, 0xdd, 0xdf: // 32-bit lengths and counts
			width = 4
		default:
			return pos, false
		}
		if pos+width > len(data) {
			return pos, false
		}
		for _, b := range data[pos : pos+width] {
			l = l<<8 | int(b)
		}
		pos += width
		switch c {
		case 0xdc, 0xdd:
			count = l
		case 0xde, 0xdf:
			count = 2 * l
		case 0xc7, 0xc8, 0xc9:
			n = l + 1 // the ext type byte
		default:
			n = l
		}
	}
	if n > len(data)-pos {
		return pos, false
	}
	pos += n
	for ; count > 0; count-- {
		var ok bool
		if pos, ok = skip(data, pos, depth+1); !ok {
			return pos, false
		}
	}
	return pos, true
}
