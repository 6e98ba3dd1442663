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
