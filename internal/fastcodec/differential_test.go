package fastcodec

import (
	"math"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// allSamples is built once: some samples are large.
var allSamples = samples()

// clone deep-copies the value v points to and returns a pointer to the
// copy, unexported fields included, so that a decode into it cannot
// reach the sample's own slices, maps or pointees.
func clone(v any) any {
	rv := reflect.ValueOf(v)
	c := reflect.New(rv.Type().Elem())
	copyDeep(c.Elem(), readable(rv.Elem()))
	return c.Interface()
}

func copyDeep(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if !src.IsNil() {
			p := reflect.New(src.Type().Elem())
			copyDeep(p.Elem(), readable(src.Elem()))
			dst.Set(p)
		}
	case reflect.Slice:
		if !src.IsNil() {
			s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
			if src.Type().Elem().Kind() == reflect.Uint8 {
				reflect.Copy(s, src)
				dst.Set(s)
				return
			}
			for i := 0; i < src.Len(); i++ {
				copyDeep(s.Index(i), src.Index(i))
			}
			dst.Set(s)
		}
	case reflect.Array:
		for i := 0; i < src.Len(); i++ {
			copyDeep(dst.Index(i), src.Index(i))
		}
	case reflect.Map:
		if !src.IsNil() {
			m := reflect.MakeMapWithSize(src.Type(), src.Len())
			for _, k := range src.MapKeys() {
				e := reflect.New(src.Type().Elem()).Elem()
				copyDeep(e, readable(src.MapIndex(k)))
				m.SetMapIndex(k, e)
			}
			dst.Set(m)
		}
	case reflect.Interface:
		if !src.IsNil() {
			e := reflect.New(src.Elem().Type()).Elem()
			copyDeep(e, readable(src.Elem()))
			dst.Set(e)
		}
	case reflect.Struct:
		if src.Type() == reflect.TypeFor[time.Time]() {
			dst.Set(src)
			return
		}
		for i := 0; i < src.NumField(); i++ {
			copyDeep(readable(dst.Field(i)), readable(src.Field(i)))
		}
	default:
		dst.Set(src)
	}
}

// zeroOf and prefilledOf make decode destinations of a sample's type:
// zero, and a copy of its last (non-zero) value.
func zeroOf(s sample) func() any {
	t := reflect.TypeOf(s.vals[0]).Elem()
	return func() any { return reflect.New(t).Interface() }
}

func prefilledOf(s sample) func() any {
	last := s.vals[len(s.vals)-1]
	return func() any { return clone(last) }
}

// Every sample value encodes to rpcx's bytes through every entry point, as
// a pointer, as a value and as a nil pointer; plain types get a plan and
// every other one keeps the library's path.
func TestDifferentialEncode(t *testing.T) {
	d := newDiff(t)
	for _, s := range allSamples {
		typ := reflect.TypeOf(s.vals[0])
		if s.planned {
			require.NotNil(t, planFor(typ), "%s should be planned", s.name)
		} else {
			require.Nil(t, planFor(typ), "%s must keep the library's path", s.name)
		}
		for _, v := range s.vals {
			d.encode(v)
			d.encode(reflect.ValueOf(v).Elem().Interface())
		}
		d.encode(reflect.Zero(typ).Interface())
	}
}

// Every sample's bytes decode through every entry point as rpcx decodes
// them, into every sample type, into a zero and into a reused (non-zero)
// destination: reordered fields, unknown fields, missing fields, and
// fields of another kind (converted, truncated or refused).
func TestDifferentialDecode(t *testing.T) {
	d := newDiff(t)
	var inputs [][]byte
	for _, s := range allSamples {
		for _, v := range s.vals {
			if b := d.encode(v); b != nil {
				inputs = append(inputs, b)
			}
		}
	}
	for _, s := range allSamples {
		for _, b := range inputs {
			d.decode(b, zeroOf(s))
			d.decode(b, prefilledOf(s))
		}
	}
}

// Truncated and damaged input decodes as rpcx decodes it: the same error
// (or, for damage, sometimes none) and the same partly decoded value.
func TestDifferentialTruncatedAndDamaged(t *testing.T) {
	d := newDiff(t)
	rng := rand.New(rand.NewSource(11))
	for _, s := range allSamples {
		for _, v := range s.vals {
			b := d.encode(v)
			if b == nil {
				continue
			}
			// Up to 96 positions of an input, 8 of a large one, whose
			// long strings add time and nothing else.
			positions := rng.Perm(len(b))
			if n := 96 - 88*min(len(b)/4096, 1); len(positions) > n {
				positions = positions[:n]
			}
			for _, n := range positions {
				d.decode(b[:n], zeroOf(s))
				d.decode(b[:n], prefilledOf(s))
				// An unused code, a flipped top bit (another code class,
				// or a length out by 128) and any byte, into a zero and a
				// reused destination in turn.
				for i, x := range []byte{0xc1, b[n] ^ 0x80, byte(rng.Intn(256))} {
					bad := append([]byte(nil), b...)
					bad[n] = x
					if declaresHuge(bad) {
						continue
					}
					if (n+i)%2 == 0 {
						d.decode(bad, zeroOf(s))
					} else {
						d.decode(bad, prefilledOf(s))
					}
				}
			}
		}
	}
}

// Decoding into a reused value: the library keeps what the input does not
// mention (it does not zero the destination first), and so does every
// entry point; a nil input zeroes the whole struct.
func TestDifferentialReusedValue(t *testing.T) {
	d := newDiff(t)
	partial, err := msgpack.Marshal(map[string]any{"I16": 5, "S": "new"})
	require.NoError(t, err)
	for _, newDst := range []func() any{
		func() any { return &widths{I: 1, I16: 2, S: "old", F64: 3} },
		func() any { return &unexported{A: 1, b: 2, C: "c", e: inner{3, "e"}} },
		func() any { return &ptrs{P: new(int), In: &inner{A: 1}} },
		func() any { return &nestedPlain{Name: "n", In: inner{1, "i"}, Last: 9} },
	} {
		d.decode(partial, newDst)
		d.decode([]byte{0xc0}, newDst)
		d.decode([]byte{0x80}, newDst)
	}
	nilInner, err := msgpack.Marshal(map[string]any{"in": nil, "Last": 3})
	require.NoError(t, err)
	d.decode(nilInner, func() any { return &nestedPlain{Name: "n", In: inner{1, "i"}, Last: 9} })
	var got widths
	got.I, got.S = 1, "old"
	require.NoError(t, Decode(protocol.MsgPack, partial, &got))
	require.Equal(t, widths{I: 1, I16: 5, S: "new"}, got, "absent fields are kept, as the library keeps them")
}

// Unknown fields of every msgpack type are skipped, wherever they come.
func TestDifferentialUnknownFields(t *testing.T) {
	d := newDiff(t)
	unknown := []any{nil, true, -70000, uint64(math.MaxUint64), float32(1.5), 2.5, "str", []byte{1},
		[]any{1, []any{2}}, map[string]any{"x": map[string]any{}}, time.Unix(1, 2), int8(-1)}
	for i, u := range unknown {
		var buf []byte
		enc := func(v any) {
			b, err := msgpack.Marshal(v)
			require.NoError(t, err)
			buf = append(buf, b...)
		}
		buf = append(buf, 0x83)
		enc("I")
		enc(i)
		enc("zz_unknown")
		enc(u)
		enc("S")
		enc("after")
		for _, s := range allSamples {
			d.decode(buf, zeroOf(s))
			d.decode(buf, prefilledOf(s))
		}
	}
}

// FuzzDifferential decodes arbitrary input into reused values of types
// with a plan and of types that hold what the plan must not handle,
// through every entry point and through rpcx's codec, and re-encodes what
// decoded: the same outcomes, values and bytes. Left out, to keep it fast:
// types that are themselves custom-coded (this package hands them to the
// library untouched, so fuzzing them fuzzes the library against itself)
// and types with maps, whose keys the library writes in Go's random order.
func FuzzDifferential(f *testing.F) {
	own := map[string]bool{"custEnc": true, "custEncPtr": true, "mpMarshal": true, "binM": true, "textM": true,
		"extVal": true, "extPtr": true, "regVal": true, "regLower": true, "regDecOnly": true}
	var targets []sample
	for _, s := range allSamples {
		if !own[s.name] && !hasMap(reflect.TypeOf(s.vals[0]), 0) {
			targets = append(targets, s)
		}
	}
	d := newDiff(f)
	for _, s := range targets {
		for _, v := range s.vals {
			if b := d.encode(v); b != nil && len(b) < 4096 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if declaresHuge(b) {
			// The library allocates for a declared length before it finds
			// the input short, up to a megabyte at a time; such inputs
			// only make the fuzzer slow.
			return
		}
		d := newDiff(t)
		for _, s := range targets {
			if v, ok := d.decode(b, prefilledOf(s)); ok {
				d.encode(v)
			}
		}
	})
}

// hasMap reports whether t holds a map or an interface (which may hold
// one) anywhere.
func hasMap(t reflect.Type, depth int) bool {
	if depth > 8 {
		return false
	}
	switch t.Kind() {
	case reflect.Map, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return hasMap(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasMap(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}
