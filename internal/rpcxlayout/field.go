package rpcxlayout

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/smallnest/rpcx/server"
)

// LayoutError names a field of rpcx (or of Go's sync.Once) that is not
// laid out as in the versions this package reads.
type LayoutError struct {
	Struct string // the struct, e.g. "server.Server"
	Field  string // the field, e.g. "inShutdown"
	Want   string // what was expected: a type or a kind
	Found  string // what was found; "no such field" when it is missing
}

// Error tells which field differs and what to do.
func (e *LayoutError) Error() string {
	return fmt.Sprintf("rpcx layout: %s.%s: want %s, found %s; rpcxbatch reads github.com/smallnest/rpcx v1.9.4, pin that version", e.Struct, e.Field, e.Want, e.Found)
}

// field returns a usable (not read-only) view of an unexported struct
// field, or false when v has no such addressable field.
func field(v reflect.Value, name string) (reflect.Value, bool) {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}, false
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), true
}

// offsetOf is where an unexported field of type F lies in a struct S, as
// locate found it; ok is false when S has no such field of that type.
type offsetOf[S, F any] struct {
	offset uintptr
	ok     bool
}

// locate finds S's field name, of type F.
func locate[S, F any](name string) offsetOf[S, F] {
	sf, found := reflect.TypeFor[S]().FieldByName(name)
	if !found || sf.Type != reflect.TypeFor[F]() {
		return offsetOf[S, F]{}
	}
	return offsetOf[S, F]{offset: sf.Offset, ok: true}
}

// in is the field within s; only where ok.
func (f offsetOf[S, F]) in(s *S) *F {
	return (*F)(unsafe.Add(unsafe.Pointer(s), f.offset))
}

// serverField reads the unexported field name of an rpcx Server, of type
// T; false when there is no such field of that type. A nil interface (no
// pool, say) is the zero T.
func serverField[T any](s *server.Server, name string) (T, bool) {
	var zero T
	f, ok := field(reflect.ValueOf(s).Elem(), name)
	if !ok || f.Type() != reflect.TypeFor[T]() {
		return zero, false
	}
	v, _ := f.Interface().(T)
	return v, true
}
