package fastcodec

import (
	"math"
	"reflect"
	"unsafe"
)

// encode appends the msgpack encoding of the struct at base to b.
func (p *structPlan) encode(b []byte, base unsafe.Pointer) []byte {
	for i := range p.enc {
		s := &p.enc[i]
		b = append(b, s.lit...)
		at := field(base, s.offset)
		switch s.kind {
		case reflect.Invalid:
		case reflect.Bool:
			if *(*bool)(at) {
				b = append(b, 0xc3)
			} else {
				b = append(b, 0xc2)
			}
		case reflect.String:
			b = appendStr(b, *(*string)(at))
		case reflect.Int:
			b = appendInt(b, int64(*(*int)(at)))
		case reflect.Uint:
			b = appendUint(b, uint64(*(*uint)(at)))
		// Sized ints keep their width, as the library writes them
		// without its UseCompactInts option.
		case reflect.Int8:
			b = append(b, 0xd0, byte(*(*int8)(at)))
		case reflect.Int16:
			b = append16(b, 0xd1, uint16(*(*int16)(at)))
		case reflect.Int32:
			b = append32(b, 0xd2, uint32(*(*int32)(at)))
		case reflect.Int64:
			b = append64(b, 0xd3, uint64(*(*int64)(at)))
		case reflect.Uint8:
			b = append(b, 0xcc, *(*uint8)(at))
		case reflect.Uint16:
			b = append16(b, 0xcd, *(*uint16)(at))
		case reflect.Uint32:
			b = append32(b, 0xce, *(*uint32)(at))
		case reflect.Uint64:
			b = append64(b, 0xcf, *(*uint64)(at))
		case reflect.Float32:
			// Through float64, as the library's encoder: a signalling
			// NaN goes out quiet.
			b = append32(b, 0xca, math.Float32bits(float32(float64(*(*float32)(at)))))
		case reflect.Float64:
			b = append64(b, 0xcb, math.Float64bits(*(*float64)(at)))
		}
	}
	return b
}

// appendUint appends n in the fewest bytes, as the library's EncodeUint.
func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return append16(b, 0xcd, uint16(n))
	case n <= math.MaxUint32:
		return append32(b, 0xce, uint32(n))
	}
	return append64(b, 0xcf, n)
}

// appendInt appends n in the fewest bytes, as the library's EncodeInt.
func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return append16(b, 0xd1, uint16(n))
	case n >= math.MinInt32:
		return append32(b, 0xd2, uint32(n))
	}
	return append64(b, 0xd3, uint64(n))
}

func append16(b []byte, code byte, n uint16) []byte {
	return append(b, code, byte(n>>8), byte(n))
}

func append32(b []byte, code byte, n uint32) []byte {
	return append(b, code, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func append64(b []byte, code byte, n uint64) []byte {
	return append(b, code, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
		byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
