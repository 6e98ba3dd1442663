package fastcodec

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

type leaves struct {
	B      bool
	S      string `msgpack:"s"`
	I      int    `msgpack:"i"`
	I8     int8
	I16    int16
	I32    int32
	I64    int64
	U      uint
	U8     uint8
	U16    uint16
	U32    uint32
	U64    uint64
	F32    float32
	F64    float64
	Skip   int `msgpack:"-"`
	hidden int
}

type nested struct {
	Name  string
	Inner leaves `msgpack:"inner"`
	Empty struct{}
	Deep  struct {
		L leaves
		N int
	}
	Last int8
}

// sixteen has enough fields for a map16 header.
type sixteen struct {
	A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, B0, B1, B2, B3, B4, B5, B6 int
}

// narrow reads another type's bytes into different kinds.
type narrow struct {
	B   uint8   `msgpack:"B"`
	S   string  `msgpack:"i"`
	I   float32 `msgpack:"I8"`
	I64 uint16  `msgpack:"I64"`
	U64 int8    `msgpack:"U64"`
	F64 float32 `msgpack:"F64"`
	F32 float64 `msgpack:"F32"`
}

type level int

func (l level) MarshalText() ([]byte, error) { return []byte("lvl"), nil }

func (l *level) UnmarshalText([]byte) error { *l = 7; return nil }

type registered int16

func init() {
	msgpack.Register(registered(0),
		func(e *msgpack.Encoder, v reflect.Value) error { return e.EncodeString("reg") },
		func(d *msgpack.Decoder, v reflect.Value) error { _, err := d.DecodeString(); v.SetInt(5); return err })
}

// Every type the plan handles is encoded to the library's exact bytes and
// decoded to the library's exact value; the types it does not handle are
// left to the library.
func TestPlanAgreesWithLibrary(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, typ := range []reflect.Type{reflect.TypeFor[leaves](), reflect.TypeFor[nested](), reflect.TypeFor[sixteen]()} {
		require.NotNil(t, planFor(reflect.PointerTo(typ)), "%v should have a plan", typ)
		for i := 0; i < 2000; i++ {
			v := reflect.New(typ)
			randomize(rng, v.Elem())
			requireSameAsLibrary(t, v.Interface())
		}
	}
}

func TestNoPlanForWhatTheLibraryTreatsSpecially(t *testing.T) {
	type withOmit struct {
		A int `msgpack:"a,omitempty"`
	}
	type withAlias struct {
		A int `msgpack:"a,alias:b"`
	}
	type asArray struct {
		_msgpack struct{} `msgpack:",as_array"`
		A        int
	}
	type embedded struct {
		leaves
		X int
	}
	type withPtr struct{ P *int }
	type withSlice struct{ S []int }
	type withTime struct{ T time.Time }
	type withText struct{ L level }
	type withRegistered struct{ R registered }
	type dupNames struct {
		A int `msgpack:"x"`
		B int `msgpack:"x"`
	}
	type quoted struct {
		A int `msgpack:"'a'"`
	}
	for _, v := range []any{&withOmit{A: 1}, &withAlias{A: 2}, &asArray{A: 3}, &embedded{X: 4},
		&withPtr{}, &withSlice{S: []int{1}}, &withTime{T: time.Unix(5, 0).UTC()}, &withText{L: 1},
		&withRegistered{R: 3}, &dupNames{A: 1, B: 2}, &quoted{A: 9}, &leaves{}} {
		typ := reflect.TypeOf(v)
		if typ.Elem() != reflect.TypeFor[leaves]() {
			require.Nil(t, planFor(typ), "%v must keep the library's path", typ)
		}
		requireSameAsLibrary(t, v)
	}
	// Not a pointer to a struct: the library's path.
	require.Nil(t, planFor(reflect.TypeFor[leaves]()))
	require.Nil(t, planFor(reflect.TypeFor[*int]()))
}

// A nil pointer encodes as nil, and nil decodes to the zero struct.
func TestPlanNil(t *testing.T) {
	var p *nested
	requireSameAsLibrary(t, p)
	v := &nested{Name: "x", Last: 3}
	require.NoError(t, Decode(protocol.MsgPack, []byte{0xc0}, v))
	require.Equal(t, nested{}, *v)

	// Untyped nil is the library's too: msgpack nil, and its error when
	// decoding into it.
	want, wantErr := msgpack.Marshal(nil)
	got, err := Encode(protocol.MsgPack, nil)
	require.Equal(t, wantErr, err)
	require.Equal(t, want, got)
	require.EqualError(t, Decode(protocol.MsgPack, []byte{0xc0}, nil), msgpack.Unmarshal([]byte{0xc0}, nil).Error())
}

// Bytes written for one type and read into another, or damaged, decode
// exactly as the library decodes them, errors included.
func TestPlanDecodesForeignBytesAsLibrary(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 3000; i++ {
		v := reflect.New(reflect.TypeFor[leaves]())
		randomize(rng, v.Elem())
		b, err := msgpack.Marshal(v.Interface())
		require.NoError(t, err)
		requireDecodesAsLibrary[narrow](t, b)
		requireDecodesAsLibrary[nested](t, b)
		requireDecodesAsLibrary[leaves](t, b[:rng.Intn(len(b))])
		b[rng.Intn(len(b))] = byte(rng.Intn(256))
		requireDecodesAsLibrary[leaves](t, b)
	}
	// Unknown fields, bin-coded names and strings, nil values.
	b, err := msgpack.Marshal(map[string]any{"s": []byte("bin"), "i": nil, "zz": 1, "B": nil})
	require.NoError(t, err)
	requireDecodesAsLibrary[leaves](t, b)
}

func FuzzPlanDecode(f *testing.F) {
	for _, v := range []any{&leaves{S: "x", I: -3, U64: math.MaxUint64}, &nested{Name: "n"}, &sixteen{B6: 300}} {
		b, err := msgpack.Marshal(v)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if declaresHuge(b) {
			// The library allocates for a declared length before it finds
			// the input short, up to a megabyte at a time; such inputs
			// only make the fuzzer slow.
			return
		}
		requireDecodesAsLibrary[leaves](t, b)
		requireDecodesAsLibrary[nested](t, b)
		requireDecodesAsLibrary[narrow](t, b)
		requireDecodesAsLibrary[sixteen](t, b)
	})
}

func requireSameAsLibrary(t testing.TB, v any) {
	t.Helper()
	want, wantErr := msgpack.Marshal(v)
	got, err := Append([]byte{0xff}, protocol.MsgPack, v)
	require.Equal(t, wantErr, err)
	require.Equal(t, want, got[1:], "%T %+v", v, v)
	if reflect.ValueOf(v).IsNil() {
		return
	}
	back := reflect.New(reflect.TypeOf(v).Elem())
	require.NoError(t, Decode(protocol.MsgPack, got[1:], back.Interface()))
	libBack := reflect.New(reflect.TypeOf(v).Elem())
	require.NoError(t, msgpack.Unmarshal(want, libBack.Interface()))
	requireSameMemory(t, libBack.Elem(), back.Elem(), fmt.Sprintf("%T", v))
}

// requireDecodesAsLibrary decodes b into a prefilled T with the plan and
// with the library: the same error or none, and the same value.
func requireDecodesAsLibrary[T any](t testing.TB, b []byte) {
	t.Helper()
	var want, got T
	fill := func(v *T) { n := 0; fillProbe(reflect.ValueOf(v).Elem(), &n, false) }
	fill(&want)
	fill(&got)
	wantErr := msgpack.Unmarshal(b, &want)
	err := Decode(protocol.MsgPack, b, &got)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error(), "bytes %x", b)
	} else {
		require.NoError(t, err, "bytes %x", b)
	}
	requireSameMemory(t, reflect.ValueOf(&want).Elem(), reflect.ValueOf(&got).Elem(), fmt.Sprintf("bytes %x", b))
}

// requireSameMemory compares two values of one struct type field by field,
// unexported and skipped fields included, floats by their bits.
func requireSameMemory(t testing.TB, want, got reflect.Value, msg string) {
	t.Helper()
	switch want.Kind() {
	case reflect.Struct:
		for i := 0; i < want.NumField(); i++ {
			requireSameMemory(t, want.Field(i), got.Field(i), msg+" ."+want.Type().Field(i).Name)
		}
	case reflect.Float32:
		require.Equal(t, *(*uint32)(want.Addr().UnsafePointer()), *(*uint32)(got.Addr().UnsafePointer()), msg)
	case reflect.Float64:
		require.Equal(t, *(*uint64)(want.Addr().UnsafePointer()), *(*uint64)(got.Addr().UnsafePointer()), msg)
	case reflect.Bool:
		require.Equal(t, want.Bool(), got.Bool(), msg)
	case reflect.String:
		require.Equal(t, want.String(), got.String(), msg)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		require.Equal(t, want.Int(), got.Int(), msg)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		require.Equal(t, want.Uint(), got.Uint(), msg)
	default:
		// Pointers, slices, time.Time's insides: compared whole, read
		// through their address as unexported fields cannot be otherwise.
		w := reflect.NewAt(want.Type(), want.Addr().UnsafePointer()).Elem().Interface()
		g := reflect.NewAt(got.Type(), got.Addr().UnsafePointer()).Elem().Interface()
		require.Equal(t, w, g, msg)
	}
}

// randomize fills v's exported leaves with values across every encoding
// width, strings across every length class.
func randomize(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				randomize(rng, v.Field(i))
			}
		}
	case reflect.Bool:
		v.SetBool(rng.Intn(2) == 1)
	case reflect.String:
		lens := []int{0, 1, 31, 32, 255, 256, 65535, 65536}
		n := lens[rng.Intn(len(lens))]
		if rng.Intn(4) > 0 {
			n = rng.Intn(40)
		}
		v.SetString(strings.Repeat("é", n/2) + strings.Repeat("a", n%2))
	case reflect.Float32, reflect.Float64:
		fs := []float64{0, math.Copysign(0, -1), math.Inf(1), math.NaN(), 1.5, -1e300, math.SmallestNonzeroFloat64}
		f := rng.NormFloat64() * 1e6
		if rng.Intn(3) == 0 {
			f = fs[rng.Intn(len(fs))]
		}
		v.SetFloat(f)
		// Signalling NaNs, which only a store of the bits makes (a
		// conversion quiets them).
		if rng.Intn(10) == 0 {
			if v.Kind() == reflect.Float32 {
				*(*uint32)(v.Addr().UnsafePointer()) = 0x7f800001
			} else {
				*(*uint64)(v.Addr().UnsafePointer()) = 0x7ff0000000000001
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(rng.Uint64()) >> rng.Intn(64))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64() >> rng.Intn(64))
	}
}

// declaresHuge reports whether some 32-bit length or count in b (read at
// any offset) exceeds 64 KiB.
func declaresHuge(b []byte) bool {
	for i, c := range b {
		switch c {
		case 0xc6, 0xc9, 0xdb, 0xdd, 0xdf:
			if i+5 <= len(b) && int(b[i+1])<<24|int(b[i+2])<<16|int(b[i+3])<<8|int(b[i+4]) > 1<<16 {
				return true
			}
		}
	}
	return false
}

// percent is a named leaf type with only a decoder registered: named leaf
// types keep the library's path, which runs it.
type percent int8

// email is a named leaf type whose registered encoder agrees with the
// default on most values (not on upper case).
type email string

// palette has an encoder registered that writes the default bytes for the
// probe's zero value but panics on others.
type palette struct{ I int }

// point has an ext decoder registered (and no encoder).
type point struct{ X, Y int }

type withPercent struct{ P percent }
type withEmail struct{ E email }
type withPalette struct{ P palette }
type withPoint struct{ P point }

func init() {
	msgpack.Register(percent(0), nil, func(d *msgpack.Decoder, v reflect.Value) error {
		n, err := d.DecodeInt64()
		if err == nil && (n < 0 || n > 100) {
			err = fmt.Errorf("percent out of range: %d", n)
		}
		v.SetInt(n)
		return err
	})
	msgpack.Register(email(""), func(e *msgpack.Encoder, v reflect.Value) error {
		return e.EncodeString(strings.ToLower(v.String()))
	}, nil)
	table := []int{0, 10}
	msgpack.Register(palette{}, func(e *msgpack.Encoder, v reflect.Value) error {
		if err := e.EncodeMapLen(1); err != nil {
			return err
		}
		if err := e.EncodeString("I"); err != nil {
			return err
		}
		return e.EncodeInt(int64(table[v.Field(0).Int()]))
	}, nil)
	msgpack.RegisterExtDecoder(9, (*point)(nil), func(d *msgpack.Decoder, v reflect.Value, n int) error {
		return d.Skip()
	})
}

// Codecs registered with the library: named leaf types are never planned,
// and a nested struct type whose registered codec differs from the default
// on the probes (in bytes, in decoded values, or by panicking) is not
// either. Every value then encodes and decodes as the library does.
func TestRegisteredCodecsKeepLibraryPath(t *testing.T) {
	for _, v := range []any{&withPercent{P: 120}, &withEmail{E: "Bob@X"}, &withPalette{P: palette{I: 1}}, &withPoint{P: point{1, 2}}} {
		require.Nil(t, planFor(reflect.TypeOf(v)), "%T", v)
		want, wantErr := msgpack.Marshal(v)
		got, err := Encode(protocol.MsgPack, v)
		require.Equal(t, wantErr, err)
		require.Equal(t, want, got, "%T", v)
	}
	b, err := msgpack.Marshal(map[string]any{"P": 120})
	require.NoError(t, err)
	requireDecodesAsLibrary[withPercent](t, b)
	b, err = msgpack.Marshal(map[string]any{"P": map[string]any{"X": 1, "Y": 2}})
	require.NoError(t, err)
	requireDecodesAsLibrary[withPoint](t, b)
}

// A codec registered for T after T's first use: fastcodec's check leaves
// the library's cache as rpcx's own first call with a *T does (its *T
// encoder bound to T's encoder as it was), so rpcx and fastcodec still
// write the same bytes, for *T (neither runs the new codec) and for T
// (both do).
func TestRegistrationAfterFirstUse(t *testing.T) {
	custom := func(e *msgpack.Encoder, v reflect.Value) error { return e.EncodeString("custom") }

	// Plain rpcx, for reference: its first call fixes *T's encoder.
	type plainFirst struct{ A int }
	before, err := rpcxCodec().Encode(&plainFirst{A: 1})
	require.NoError(t, err)
	msgpack.Register(plainFirst{}, custom, nil)
	after, err := rpcxCodec().Encode(&plainFirst{A: 1})
	require.NoError(t, err)
	require.Equal(t, before, after, "rpcx itself does not see a codec registered after first use")

	type later struct{ A int }
	_, err = Encode(protocol.MsgPack, &later{A: 1})
	require.NoError(t, err)
	require.NotNil(t, planFor(reflect.TypeFor[*later]()))
	msgpack.Register(later{}, custom, nil)
	for _, v := range []any{&later{A: 1}, later{A: 1}} {
		want, err := rpcxCodec().Encode(v)
		require.NoError(t, err)
		got, err := Encode(protocol.MsgPack, v)
		require.NoError(t, err)
		require.Equal(t, want, got, "%T", v)
	}
}

// A field the type does not have (a peer on a newer version of it) is
// skipped by the plan itself, values of every msgpack type.
func TestPlanSkipsUnknownFields(t *testing.T) {
	p := planFor(reflect.TypeFor[*leaves]())
	require.NotNil(t, p)
	extra := map[string]any{
		"i": 5, "new_int": -70000, "new_str": strings.Repeat("z", 300), "new_bin": []byte{1, 2},
		"new_map": map[string]any{"x": []any{1.5, nil, true, map[string]any{}}}, "new_f32": float32(2.5),
		"new_time": time.Unix(1, 2), "new_u64": uint64(math.MaxUint64), "s": "kept",
	}
	b, err := msgpack.Marshal(extra)
	require.NoError(t, err)
	var got leaves
	require.True(t, p.decode(b, unsafe.Pointer(&got)), "decoded by the plan")
	var want leaves
	require.NoError(t, msgpack.Unmarshal(b, &want))
	require.Equal(t, want, got)
	require.Equal(t, 5, got.I)
	require.Equal(t, "kept", got.S)
	requireDecodesAsLibrary[leaves](t, b)
}

// Goroutines meeting a type for the first time together each get the
// library's bytes and values (run under the race detector by make test).
func TestPlanFirstUseConcurrently(t *testing.T) {
	type fresh struct {
		A int
		S string
		N struct{ X float32 }
	}
	want, err := msgpack.Marshal(&fresh{A: 1, S: "s", N: struct{ X float32 }{2.5}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got, err := Encode(protocol.MsgPack, &fresh{A: 1, S: "s", N: struct{ X float32 }{2.5}})
				assert.NoError(t, err)
				assert.Equal(t, want, got)
				var v fresh
				assert.NoError(t, Decode(protocol.MsgPack, want, &v))
				assert.Equal(t, fresh{A: 1, S: "s", N: struct{ X float32 }{2.5}}, v)
			}
		})
	}
	wg.Wait()
	require.NotNil(t, planFor(reflect.TypeFor[*fresh]()))
}

// versionOne and versionTwo are one type before and after a field was
// added: a peer on the newer version sends a field the older one lacks.
type versionOne struct {
	A, B, C, D, E, F, G, H int
	S, T                   string
}

type versionTwo struct {
	A, B, C, D, E, F, G, H int
	S, T                   string
	Extra                  int
}

// BenchmarkDecodeUnknownField decodes a versionTwo into a versionOne with
// the plan (which skips the extra field itself) and with the library.
func BenchmarkDecodeUnknownField(b *testing.B) {
	data, err := msgpack.Marshal(&versionTwo{A: 1, S: "hello", T: "world", Extra: 5})
	require.NoError(b, err)
	b.Run("plan", func(b *testing.B) {
		var v versionOne
		for b.Loop() {
			if err := Decode(protocol.MsgPack, data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		var v versionOne
		for b.Loop() {
			if err := msgpack.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
