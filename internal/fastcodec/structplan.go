package fastcodec

import (
	"bytes"
	"encoding"
	"math"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unsafe"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
	"github.com/vmihailenco/msgpack/v5"
)

// A structPlan encodes and decodes one struct type the way vmihailenco's
// msgpack does with the settings rpcx uses (a map of field name to value,
// compact int and uint, fixed-width sized ints, no omitempty), but from
// field offsets worked out once instead of reflect and the library's
// per-struct cache lookups on every value. Only simple shapes get a plan
// (see compileStruct): leaf fields of predeclared types (int, string, ...,
// not named types, whose codec a user may register), and structs of such
// fields nested by value. Every other type keeps the library's path.
//
// The struct type, its pointer type or a nested struct type may have a
// codec of its own: a method the library looks for (CustomEncoder,
// Marshaler, encoding.BinaryMarshaler, TextMarshaler and their decoding
// halves, on T or *T), which compileStruct sees, or a codec registered
// with msgpack.Register, RegisterExt and the like, which cannot be seen
// from outside the library. A plan is therefore checked against the
// library before first use: probe values encoded both ways, as T and as
// *T, and probe inputs decoded both ways, must agree. That catches a
// registered codec that writes or reads anything but a map of the fields
// on the probes (mixed-case, padded strings; negative and extreme
// numbers); one that agrees with the default on all of them, or one
// registered after the type's first use here, is not seen.
type structPlan struct {
	typ    reflect.Type
	fields []fieldPlan
	// enc is the whole encoding flattened: literal bytes (map headers and
	// keys, which never change) followed by one leaf value to append.
	enc []encStep
}

// fieldPlan is one field of a struct as the decoder sees it.
type fieldPlan struct {
	name   string
	kind   reflect.Kind
	offset uintptr
	sub    *structPlan // kind == reflect.Struct
	// word is name packed by packName when it is at most 8 bytes long
	// (short): decoding matches such a name with one comparison (matches).
	word  uint64
	short bool
	// keyWord is the name as the library's encoder writes it (fixstr
	// header and bytes), packed, when that is at most 8 bytes (keyLen,
	// else 0): decodeAt checks the bytes at hand against it first.
	keyWord uint64
	keyLen  int
}

// encStep appends lit, then the leaf of kind at offset (none for
// reflect.Invalid, which closes the plan).
type encStep struct {
	lit    []byte
	kind   reflect.Kind
	offset uintptr
}

// plans caches a *structPlan, or noPlan, per pointer-to-struct type.
var plans sync.Map

// noPlan marks a type that keeps the library's path.
var noPlan = new(structPlan)

// planFor returns the plan for values of type t (a *struct), or nil.
func planFor(t reflect.Type) *structPlan {
	if t == nil {
		return nil
	}
	if p, ok := plans.Load(t); ok {
		if p == noPlan {
			return nil
		}
		return p.(*structPlan)
	}
	var p *structPlan
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		p = compileStruct(t.Elem(), 0)
		if p != nil && !p.agreesWithLibrary() {
			p = nil
		}
	}
	if p == nil {
		plans.Store(t, noPlan)
	} else {
		plans.Store(t, p)
	}
	return p
}

// maxPlanDepth bounds nesting; deeper structs (and recursive types, which
// cannot nest by value anyway) keep the library's path.
const maxPlanDepth = 8

var (
	customEncoderType     = reflect.TypeFor[msgpack.CustomEncoder]()
	customDecoderType     = reflect.TypeFor[msgpack.CustomDecoder]()
	marshalerType         = reflect.TypeFor[msgpack.Marshaler]()
	unmarshalerType       = reflect.TypeFor[msgpack.Unmarshaler]()
	binaryMarshalerType   = reflect.TypeFor[encoding.BinaryMarshaler]()
	binaryUnmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	textMarshalerType     = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// hasOwnCodec reports whether the library would hand t (or *t) to one of
// its interfaces instead of encoding it by kind.
func hasOwnCodec(t reflect.Type) bool {
	for _, x := range []reflect.Type{t, reflect.PointerTo(t)} {
		for _, i := range []reflect.Type{customEncoderType, customDecoderType, marshalerType, unmarshalerType,
			binaryMarshalerType, binaryUnmarshalerType, textMarshalerType, textUnmarshalerType} {
			if x.Implements(i) {
				return true
			}
		}
	}
	return false
}

// fieldName returns the msgpack name of f, whether the field is encoded
// at all, and whether its tag is one this plan understands: a plain name
// (letters, digits, "_", "-", ".") or "-", with no options.
func fieldName(f reflect.StructField) (name string, encoded, ok bool) {
	tag := f.Tag.Get("msgpack")
	if tag == "-" {
		return "", false, true
	}
	for _, r := range tag {
		// Names of letters, digits and _-. only: anything else may mean
		// something to the library's tag parser (options, quoting).
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-.", r) {
			return "", false, false
		}
	}
	if !f.IsExported() {
		return "", false, true
	}
	if tag == "" {
		tag = f.Name
	}
	return tag, true, true
}

// compileStruct returns a plan for struct type t, or nil
// when t has a field the plan does not handle exactly as the library.
func compileStruct(t reflect.Type, depth int) *structPlan {
	if depth > maxPlanDepth || hasOwnCodec(t) {
		return nil
	}
	p := &structPlan{typ: t}
	seen := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		// The library reads options from a field named _msgpack and
		// inlines embedded structs; leave both to it.
		if f.Anonymous || f.Name == "_msgpack" {
			return nil
		}
		name, encoded, ok := fieldName(f)
		if !ok {
			return nil
		}
		if !encoded {
			continue
		}
		if seen[name] || hasOwnCodec(f.Type) {
			return nil
		}
		seen[name] = true
		fp := fieldPlan{name: name, kind: f.Type.Kind(), offset: f.Offset}
		if len(name) <= 8 {
			fp.word, fp.short = packName([]byte(name)), true
		}
		if key := mpack.AppendStr(nil, name); len(key) <= 8 {
			fp.keyWord, fp.keyLen = packName(key), len(key)
		}
		switch fp.kind {
		case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if !predeclared(f.Type) {
				return nil
			}
		case reflect.Struct:
			if fp.sub = compileStruct(f.Type, depth+1); fp.sub == nil {
				return nil
			}
		default:
			return nil
		}
		p.fields = append(p.fields, fp)
	}
	p.enc = p.flatten(nil, 0)
	return p
}

// flatten appends p's encoding steps, at base offset, to steps. The
// closing step carries only the trailing literal.
func (p *structPlan) flatten(steps []encStep, base uintptr) []encStep {
	var lit []byte
	lit = mpack.AppendMapLen(lit, len(p.fields))
	for _, f := range p.fields {
		lit = mpack.AppendStr(lit, f.name)
		if f.kind == reflect.Struct {
			// The nested plan starts with its own map header: carry the
			// pending literal into its first step.
			sub := f.sub.flatten(nil, base+f.offset)
			sub[0].lit = append(lit, sub[0].lit...)
			last := len(sub) - 1
			steps = append(steps, sub[:last]...)
			lit = append([]byte(nil), sub[last].lit...)
			continue
		}
		steps = append(steps, encStep{lit: lit, kind: f.kind, offset: base + f.offset})
		lit = nil
	}
	return append(steps, encStep{lit: lit, kind: reflect.Invalid})
}

// predeclared reports whether t is a predeclared type (int, string, ...)
// rather than a named type of that kind.
func predeclared(t reflect.Type) bool {
	return t.PkgPath() == "" && t.Name() == t.Kind().String()
}

// agreesWithLibrary checks the plan against the library: probe values
// (zero, filled, filled at the widest widths) encode to the same bytes
// both ways, as T and as *T, and those bytes, and a map of every field to
// nil, decode to the same value both ways. Encoding *T too is what finds a
// codec registered on the pointer type (msgpack.Register((*T)(nil), ...)),
// which the library runs for the *T that rpcx hands it and never for a T;
// a nil *T must encode as nil. Decoding needs no such probe: the library
// decodes into *T through T's decoder.
//
// Encoding *T leaves in the library's cache what rpcx's own codec leaves
// there on the first call with a *T argument: a pointer encoder bound to
// T's encoder as it is now. A codec registered for T after that is not
// seen for *T by either, so the two still agree; this package does not
// see one registered for *T after first use (see structPlan).
//
// A panic (a registered codec meeting a made-up value) counts as
// disagreement.
func (p *structPlan) agreesWithLibrary() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	var inputs [][]byte
	for variant := range 3 {
		v := reflect.New(p.typ)
		if variant > 0 {
			n := 0
			fillProbe(v.Elem(), &n, variant == 2)
		}
		mine := p.encode(nil, v.UnsafePointer())
		for _, lv := range []reflect.Value{v.Elem(), v} {
			var lib bytes.Buffer
			if err := msgpack.NewEncoder(&lib).EncodeValue(lv); err != nil {
				return false
			}
			if !bytes.Equal(lib.Bytes(), mine) {
				return false
			}
		}
		inputs = append(inputs, mine)
	}
	var lib bytes.Buffer
	if err := msgpack.NewEncoder(&lib).EncodeValue(reflect.Zero(reflect.PointerTo(p.typ))); err != nil ||
		!bytes.Equal(lib.Bytes(), []byte{0xc0}) {
		return false
	}
	nils := mpack.AppendMapLen(nil, len(p.fields))
	for _, f := range p.fields {
		nils = append(mpack.AppendStr(nils, f.name), 0xc0)
	}
	for _, in := range append(inputs, nils) {
		mine, lib := reflect.New(p.typ), reflect.New(p.typ)
		if !p.decode(in, mine.UnsafePointer()) {
			return false
		}
		if err := msgpack.NewDecoder(bytes.NewReader(in)).DecodeValue(lib.Elem()); err != nil {
			return false
		}
		if !reflect.DeepEqual(mine.Elem().Interface(), lib.Elem().Interface()) {
			return false
		}
	}
	return true
}

// fillProbe sets every leaf of v to a distinct value that needs more than
// one byte in msgpack, so that width and sign handling are compared too;
// wide picks the widest encodings instead.
func fillProbe(v reflect.Value, n *int, wide bool) {
	*n++
	k := *n
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillProbe(v.Field(i), n, wide)
			}
		}
	case reflect.Bool:
		v.SetBool(!wide)
	case reflect.String:
		if wide {
			k += 70000
		}
		// Mixed case, padding and a non-ASCII letter, so that a
		// registered codec that normalises strings differs.
		v.SetString(" É" + strings.Repeat("xY", (30+k)/2) + " ")
	case reflect.Float32, reflect.Float64:
		if wide {
			v.SetFloat(-float64(k) * 1e30)
		} else {
			v.SetFloat(float64(k) + 0.5)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if wide {
			v.SetInt(math.MinInt64 + int64(k))
		} else {
			v.SetInt(-int64(100 + k))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if wide {
			v.SetUint(math.MaxUint64 - uint64(k))
		} else {
			v.SetUint(uint64(200 + k))
		}
	}
}

// field returns the address of the field at offset in the struct at base.
func field(base unsafe.Pointer, offset uintptr) unsafe.Pointer {
	return unsafe.Add(base, offset)
}
