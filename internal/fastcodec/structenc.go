package fastcodec

import (
	"math"
	"reflect"
	"unsafe"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
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
			b = mpack.AppendStr(b, *(*string)(at))
		case reflect.Int:
			b = mpack.AppendInt(b, int64(*(*int)(at)))
		case reflect.Uint:
			b = mpack.AppendUint(b, uint64(*(*uint)(at)))
		// Sized ints keep their width, as the library writes them
		// without its UseCompactInts option.
		case reflect.Int8:
			b = append(b, 0xd0, byte(*(*int8)(at)))
		case reflect.Int16:
			b = mpack.Append16(b, 0xd1, uint16(*(*int16)(at)))
		case reflect.Int32:
			b = mpack.Append32(b, 0xd2, uint32(*(*int32)(at)))
		case reflect.Int64:
			b = mpack.Append64(b, 0xd3, uint64(*(*int64)(at)))
		case reflect.Uint8:
			b = append(b, 0xcc, *(*uint8)(at))
		case reflect.Uint16:
			b = mpack.Append16(b, 0xcd, *(*uint16)(at))
		case reflect.Uint32:
			b = mpack.Append32(b, 0xce, *(*uint32)(at))
		case reflect.Uint64:
			b = mpack.Append64(b, 0xcf, *(*uint64)(at))
		case reflect.Float32:
			// Through float64, as the library's encoder: a signalling
			// NaN goes out quiet.
			b = mpack.Append32(b, 0xca, math.Float32bits(float32(float64(*(*float32)(at)))))
		case reflect.Float64:
			b = mpack.Append64(b, 0xcb, math.Float64bits(*(*float64)(at)))
		}
	}
	return b
}
