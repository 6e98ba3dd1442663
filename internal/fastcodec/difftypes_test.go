package fastcodec

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// The types of the differential suite, each with sample values. Plain ones
// get a plan, and so test it; the others test that the library's path is
// taken, or that the plan agrees where it is not.

// widths has every int, uint and float width.
type widths struct {
	I   int
	I8  int8
	I16 int16
	I32 int32
	I64 int64
	U   uint
	U8  uint8
	U16 uint16
	U32 uint32
	U64 uint64
	F32 float32
	F64 float64
	B   bool
	S   string
}

// widthsSwapped has widths' names with other kinds: widths' bytes decoded
// into it convert, truncate, or fail.
type widthsSwapped struct {
	I   string
	I8  int64
	I16 uint8
	I32 float32
	I64 int8
	U   int16
	U8  bool
	U16 float64
	U32 int8
	U64 uint8
	F32 int
	F64 float32
	B   uint
	S   []byte
}

// widthsReversed has widths' fields in the reverse order.
type widthsReversed struct {
	S   string
	B   bool
	F64 float64
	F32 float32
	U64 uint64
	U32 uint32
	U16 uint16
	U8  uint8
	U   uint
	I64 int64
	I32 int32
	I16 int16
	I8  int8
	I   int
}

// widthsFewer has some of widths' fields: the rest are unknown to it.
type widthsFewer struct {
	I16 int16
	S   string
	New int
}

type inner struct {
	A int
	B string
}

type nestedPlain struct {
	Name  string
	In    inner `msgpack:"in"`
	Deep  struct{ X, Y inner }
	Empty struct{}
	Last  uint16
}

// names has the field names a plan accepts: long (str8), non-ASCII,
// with dots and dashes, and one equal to another field's Go name.
type names struct {
	Long  int    `msgpack:"a_field_name_longer_than_thirty_two_bytes"`
	Naive string `msgpack:"naïve"`
	Dot   int8   `msgpack:"a.b"`
	Dash  uint   `msgpack:"a-b"`
	Swap  bool   `msgpack:"Long"`
	Empty int    `msgpack:""`
}

type tags struct {
	Name     string `msgpack:"name"`
	Omit     int    `msgpack:"omit,omitempty"`
	OmitS    string `msgpack:",omitempty"`
	Skip     int    `msgpack:"-"`
	Dash     int    `msgpack:"-,"`
	JSONOnly int    `json:"json_only"`
	JSONOmit string `json:"json_omit,omitempty"`
	JSONSkip int    `json:"-"`
	Both     int    `json:"j" msgpack:"m"`
	Alias    int    `msgpack:"al,alias:aa"`
}

type asArray struct {
	_msgpack struct{} `msgpack:",as_array"`
	A        int
	B        string
	C        inner
}

type omitAll struct {
	_msgpack struct{} `msgpack:",omitempty"`
	A        int
	B        string
}

type embVal struct {
	inner
	Z int
}

type embPtr struct {
	*inner
	Z int
}

type embShadow struct {
	inner
	A string
}

type embNamed struct {
	inner `msgpack:"in"`
	Z     int
}

type ptrs struct {
	P   *int
	S   *string
	In  *inner
	PP  **int
	Nil *inner
}

type colls struct {
	S  []inner
	SP []*inner
	M  map[string]inner
	MP map[string]*inner
	A  [2]inner
	MI map[int]int8
}

type bytesT struct {
	B []byte
	E []byte
	N []byte
	A [3]byte
	S string
}

type times struct {
	T time.Time
	P *time.Time
	D time.Duration
	Z time.Time
}

type ifaces struct {
	I any
	M map[string]any
	S []any
	E any
}

type unexported struct {
	A int
	b int
	C string
	d *int
	e inner
}

// Types with a codec of their own, by method (on T or *T) or registered
// (on T or *T). Each has fields a plan would otherwise handle.

type custEnc struct{ A, B int }

func (c custEnc) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeInt(int64(c.A*1000 + c.B)) }

func (c *custEnc) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeInt()
	c.A, c.B = n/1000, n%1000
	return err
}

type custEncPtr struct{ A, B int }

func (c *custEncPtr) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeArrayLen(0) }

func (c *custEncPtr) DecodeMsgpack(d *msgpack.Decoder) error {
	_, err := d.DecodeArrayLen()
	c.A = 99
	return err
}

type mpMarshal struct{ A int }

func (m mpMarshal) MarshalMsgpack() ([]byte, error) { return msgpack.Marshal(fmt.Sprint("mp", m.A)) }

func (m *mpMarshal) UnmarshalMsgpack(b []byte) error {
	var s string
	if err := msgpack.Unmarshal(b, &s); err != nil {
		return err
	}
	_, err := fmt.Sscanf(s, "mp%d", &m.A)
	return err
}

type binM struct{ A int }

func (m *binM) MarshalBinary() ([]byte, error) { return []byte{byte(m.A)}, nil }

func (m *binM) UnmarshalBinary(b []byte) error {
	if len(b) != 1 {
		return errors.New("binM: want one byte")
	}
	m.A = int(b[0])
	return nil
}

type textM struct{ A int }

func (m textM) MarshalText() ([]byte, error) { return []byte(fmt.Sprint("t", m.A)), nil }

func (m *textM) UnmarshalText(b []byte) error {
	_, err := fmt.Sscanf(string(b), "t%d", &m.A)
	return err
}

// extVal is registered as an extension on T, extPtr on *T.
type extVal struct{ A int }

func (m extVal) MarshalMsgpack() ([]byte, error) { return []byte{byte(m.A), 1}, nil }

func (m extVal) UnmarshalMsgpack(b []byte) error { return nil }

type extPtr struct{ A int }

func (m *extPtr) MarshalMsgpack() ([]byte, error) { return []byte{byte(m.A), 2}, nil }

func (m *extPtr) UnmarshalMsgpack(b []byte) error {
	if len(b) != 2 {
		return errors.New("extPtr: want two bytes")
	}
	m.A = int(b[0])
	return nil
}

// regVal has a codec registered on T; regLower one that lower-cases its
// strings (the default bytes for lower-case values); regDecOnly only a
// decoder, which checks a range.
type regVal struct{ A int }
type regLower struct{ S string }
type regDecOnly struct{ N int }

func init() {
	msgpack.RegisterExt(11, extVal{})
	msgpack.RegisterExt(12, (*extPtr)(nil))
	msgpack.Register(regVal{},
		func(e *msgpack.Encoder, v reflect.Value) error {
			return e.EncodeString(fmt.Sprint("rv", v.Field(0).Int()))
		},
		func(d *msgpack.Decoder, v reflect.Value) error {
			s, err := d.DecodeString()
			if err != nil {
				return err
			}
			var n int
			_, err = fmt.Sscanf(s, "rv%d", &n)
			v.Field(0).SetInt(int64(n))
			return err
		})
	msgpack.Register((*regLower)(nil), func(e *msgpack.Encoder, v reflect.Value) error {
		if v.IsNil() {
			return e.EncodeNil()
		}
		if err := e.EncodeMapLen(1); err != nil {
			return err
		}
		if err := e.EncodeString("S"); err != nil {
			return err
		}
		return e.EncodeString(strings.ToLower(v.Elem().Field(0).String()))
	}, nil)
	msgpack.Register(regDecOnly{}, nil, func(d *msgpack.Decoder, v reflect.Value) error {
		var m map[string]int
		if err := d.Decode(&m); err != nil {
			return err
		}
		if m["N"] < 0 || m["N"] > 100 {
			return fmt.Errorf("regDecOnly: N out of range: %d", m["N"])
		}
		v.Field(0).SetInt(int64(m["N"]))
		return nil
	})
}

// Holders put each of them at some depth, by value, by pointer, in a
// slice.
type holdsCustom struct {
	X int
	N struct {
		C custEnc
		Y int
	}
}

type holdsCustomPtr struct{ N struct{ P custEncPtr } }

type holdsMarshalers struct {
	M mpMarshal
	B binM
	T textM
	I int
}

type holdsExt struct {
	V extVal
	P extPtr
	Q *extPtr
}

type holdsRegistered struct {
	R  regVal
	L  regLower
	LP *regLower
	D  regDecOnly
	O  regOnPtr
	OP *regOnPtr
	S  []regOnPtr
}

// holdsDecOnly nests a type with only a decoder registered: it must not
// get a plan, as the plan would not run the decoder.
type holdsDecOnly struct {
	D regDecOnly
	X int
}

// holdsLower nests by value a type with a codec registered on its pointer
// type, which the library uses only for pointers: a plan agrees.
type holdsLower struct {
	L regLower
	X int
}

// sample is a type with values of it: the first is the zero value.
type sample struct {
	name string
	vals []any // pointers to values of one type
	// planned says the type is simple enough for a plan and agrees with
	// the library on it; false means it must keep the library's path.
	planned bool
}

func intEdges() []int64 {
	return []int64{0, 1, -1, -32, -33, math.MaxInt8, math.MinInt8, math.MaxInt8 + 1, math.MinInt8 - 1,
		math.MaxUint8, math.MaxUint8 + 1, math.MaxInt16, math.MinInt16, math.MaxInt16 + 1, math.MinInt16 - 1,
		math.MaxUint16, math.MaxUint16 + 1, math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1,
		math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MinInt64}
}

func floatEdges() []float64 {
	return []float64{0, math.Copysign(0, -1), 1.5, -2.25, math.Inf(1), math.Inf(-1), math.NaN(),
		math.SmallestNonzeroFloat64, math.MaxFloat64, math.SmallestNonzeroFloat32, math.MaxFloat32, 1e40, -1e-50}
}

// widthSamples sets every field of widths to the i-th edge value of its
// kind, as a Go conversion would (wrapping, rounding).
func widthSamples() []any {
	ints, floats := intEdges(), floatEdges()
	var out []any
	for i := range max(len(ints), len(floats)) {
		n := ints[i%len(ints)]
		u := uint64(n)
		f := floats[i%len(floats)]
		out = append(out, &widths{
			I: int(n), I8: int8(n), I16: int16(n), I32: int32(n), I64: n,
			U: uint(u), U8: uint8(u), U16: uint16(u), U32: uint32(u), U64: u,
			F32: float32(f), F64: f, B: i%2 == 1, S: strings.Repeat("é", i*3),
		})
	}
	// Uints above MaxInt64 and the string length classes.
	out = append(out, &widths{U: math.MaxUint64, U64: math.MaxUint64 - 1, S: strings.Repeat("s", 31)},
		&widths{U64: 1 << 63, S: strings.Repeat("s", 32)},
		&widths{S: strings.Repeat("s", 255)}, &widths{S: strings.Repeat("s", 256)},
		&widths{S: strings.Repeat("s", 65535)}, &widths{S: strings.Repeat("s", 65536)})
	// A signalling NaN, which only a store of the bits makes.
	w := &widths{}
	*(*uint32)(unsafe.Pointer(&w.F32)) = 0x7f800001
	*(*uint64)(unsafe.Pointer(&w.F64)) = 0x7ff0000000000001
	return append(out, w)
}

func samples() []sample {
	one, two := 1, 2
	onep := &one
	str := "str"
	tm := time.Date(2024, 2, 29, 23, 59, 59, 123456789, time.FixedZone("X", 3600))
	return []sample{
		{"widths", append([]any{&widths{}}, widthSamples()...), true},
		{"widthsSwapped", []any{&widthsSwapped{}, &widthsSwapped{I: "x", I8: -5, I16: 7, U8: true, S: []byte("b")}}, false},
		{"widthsReversed", []any{&widthsReversed{}, &widthsReversed{S: "r", I: -7, U64: 9, F32: 2.5}}, true},
		{"widthsFewer", []any{&widthsFewer{}, &widthsFewer{I16: -300, S: "f", New: 4}}, true},
		{"nestedPlain", []any{&nestedPlain{}, &nestedPlain{Name: "n", In: inner{1, "i"},
			Deep: struct{ X, Y inner }{inner{2, "x"}, inner{-3, "y"}}, Last: 65535}}, true},
		{"names", []any{&names{}, &names{Long: 1, Naive: "ï", Dot: -1, Dash: 2, Swap: true, Empty: 3}}, true},
		{"sixteen", []any{&sixteen{}, &sixteen{A0: -1, A9: 1 << 40, B6: 300}}, true},
		{"tags", []any{&tags{}, &tags{Name: "n", Omit: 1, OmitS: "o", Skip: 2, Dash: 3, JSONOnly: 4,
			JSONOmit: "j", JSONSkip: 5, Both: 6, Alias: 7}, &tags{Name: "only"}}, false},
		{"asArray", []any{&asArray{}, &asArray{A: 1, B: "b", C: inner{2, "c"}}}, false},
		{"omitAll", []any{&omitAll{}, &omitAll{A: 1}, &omitAll{B: "b"}}, false},
		{"embVal", []any{&embVal{}, &embVal{inner: inner{1, "a"}, Z: 2}}, false},
		{"embPtr", []any{&embPtr{}, &embPtr{inner: &inner{1, "a"}, Z: 2}, &embPtr{Z: 3}}, false},
		{"embShadow", []any{&embShadow{}, &embShadow{inner: inner{1, "a"}, A: "outer"}}, false},
		{"embNamed", []any{&embNamed{}, &embNamed{inner: inner{1, "a"}, Z: 2}}, false},
		{"ptrs", []any{&ptrs{}, &ptrs{P: &one, S: &str, In: &inner{1, "p"}, PP: &onep}}, false},
		{"colls", []any{&colls{}, &colls{S: []inner{{1, "a"}, {2, "b"}}, SP: []*inner{{3, "c"}, nil},
			M: map[string]inner{"k": {4, "d"}}, MP: map[string]*inner{"k": nil}, A: [2]inner{{5, "e"}},
			MI: map[int]int8{-1: -2}}, &colls{S: []inner{}, M: map[string]inner{}}}, false},
		{"bytesT", []any{&bytesT{}, &bytesT{B: make([]byte, 300), N: make([]byte, 70000)},
			&bytesT{B: []byte{1, 2, 3}, E: []byte{}, A: [3]byte{7, 8, 9}, S: "s"}}, false},
		{"times", []any{&times{}, &times{T: tm, P: &tm, D: -time.Second}, &times{T: time.Unix(0, 0).UTC(),
			Z: time.Unix(1<<34, 1)}, &times{T: time.Unix(-1, 999999999)}}, false},
		{"ifaces", []any{&ifaces{}, &ifaces{I: 1, M: map[string]any{"k": []any{int8(1), "s", nil, 2.5}},
			S: []any{true, uint64(math.MaxUint64), []byte{1}, map[string]any{"x": nil}}, E: &inner{1, "i"}},
			&ifaces{I: tm, E: int64(-1)}}, false},
		{"unexported", []any{&unexported{}, &unexported{A: 1, b: 2, C: "c", d: &two, e: inner{3, "e"}}}, true},
		{"custEnc", []any{&custEnc{}, &custEnc{A: 3, B: 4}}, false},
		{"custEncPtr", []any{&custEncPtr{}, &custEncPtr{A: 3}}, false},
		{"mpMarshal", []any{&mpMarshal{}, &mpMarshal{A: -4}}, false},
		{"binM", []any{&binM{}, &binM{A: 200}}, false},
		{"textM", []any{&textM{}, &textM{A: 12}}, false},
		{"extVal", []any{&extVal{}, &extVal{A: 5}}, false},
		{"extPtr", []any{&extPtr{}, &extPtr{A: 6}}, false},
		{"regVal", []any{&regVal{}, &regVal{A: 7}}, false},
		{"regLower", []any{&regLower{}, &regLower{S: "Mixed Case"}, &regLower{S: "lower"}}, false},
		{"regDecOnly", []any{&regDecOnly{}, &regDecOnly{N: 50}, &regDecOnly{N: 500}}, false},
		{"regOnPtr", []any{&regOnPtr{}, &regOnPtr{A: 8, B: "b"}}, false},
		{"holdsCustom", []any{&holdsCustom{}, func() any { h := &holdsCustom{X: 1}; h.N.C = custEnc{1, 2}; h.N.Y = 3; return h }()}, false},
		{"holdsCustomPtr", []any{&holdsCustomPtr{}}, false},
		{"holdsMarshalers", []any{&holdsMarshalers{}, &holdsMarshalers{M: mpMarshal{1}, B: binM{2}, T: textM{3}, I: 4}}, false},
		{"holdsExt", []any{&holdsExt{}, &holdsExt{V: extVal{1}, P: extPtr{2}, Q: &extPtr{3}}}, false},
		{"holdsDecOnly", []any{&holdsDecOnly{}, &holdsDecOnly{D: regDecOnly{5}, X: 1}, &holdsDecOnly{D: regDecOnly{-5}}}, false},
		{"holdsLower", []any{&holdsLower{}, &holdsLower{L: regLower{"Mixed"}, X: 2}}, true},
		{"holdsRegistered", []any{&holdsRegistered{}, &holdsRegistered{R: regVal{1}, L: regLower{"Up"}, LP: &regLower{"Up"},
			D: regDecOnly{2}, O: regOnPtr{3, "o"}, OP: &regOnPtr{4, "op"}, S: []regOnPtr{{5, "s"}}}}, false},
	}
}
