package invoke

import (
	"context"
	"reflect"
	"unsafe"
)

// Method is one callable of an rpcx service: a method on a receiver or a
// registered function. It does not change after Bind, and may be copied
// and used from many goroutines.
type Method struct {
	fn        reflect.Value
	rcvr      reflect.Value // invalid for functions
	name      string        // the method's name; empty for functions
	argType   reflect.Type
	replyType reflect.Type
	// ctxIface is whether the context parameter is context.Context.
	ctxIface bool
	// direct, when set, calls the method without reflect, on directRcvr
	// (see direct).
	direct     func(rcvr unsafe.Pointer, ctx context.Context, arg, reply unsafe.Pointer) error
	directRcvr unsafe.Pointer
}

// Bind returns the caller of fn, whose parameters after the receiver (if
// any) are a context, argType and replyType, and whose one result is an
// error. For a method, fn is the method expression (reflect.Method.Func),
// rcvr the receiver and name the method's name; for a function, rcvr is
// the zero Value and name is empty. The caller checks that shape, as rpcx
// checked it on registration.
func Bind(fn, rcvr reflect.Value, name string, argType, replyType reflect.Type) Method {
	m := Method{fn: fn, rcvr: rcvr, name: name, argType: argType, replyType: replyType}
	m.ctxIface = m.ctxType() == contextType
	m.direct, m.directRcvr = direct(&m)
	return m
}

// ArgType is the type of the method's argument parameter.
func (m *Method) ArgType() reflect.Type { return m.argType }

// ReplyType is the type of the method's reply parameter.
func (m *Method) ReplyType() reflect.Type { return m.replyType }

// Direct reports whether the method is called without reflect.
func (m *Method) Direct() bool { return m.direct != nil }

// Call calls the method with arg (of ArgType) and reply (of ReplyType)
// and returns its error.
func (m *Method) Call(ctx context.Context, arg, reply reflect.Value) error {
	if m.direct != nil {
		return m.direct(m.directRcvr, ctx, arg.UnsafePointer(), reply.UnsafePointer())
	}
	return m.callReflect(ctx, arg, reply)
}

// callReflect calls the method with reflect. It is a function of its own
// because reflect makes ctx escape: in Call, that moved ctx to the heap
// on every call, direct ones too.
func (m *Method) callReflect(ctx context.Context, arg, reply reflect.Value) error {
	// A context parameter of type context.Context gets the context as a
	// value of that interface type: passed as its concrete type
	// (*share.Context), reflect would check on every call that the type
	// implements the interface. A parameter of a concrete type (rpcx also
	// accepts *share.Context) gets the concrete value.
	ctxV := reflect.ValueOf(&ctx).Elem()
	if !m.ctxIface {
		ctxV = reflect.ValueOf(ctx)
	}
	var out []reflect.Value
	if m.rcvr.IsValid() {
		out = m.fn.Call([]reflect.Value{m.rcvr, ctxV, arg, reply})
	} else {
		out = m.fn.Call([]reflect.Value{ctxV, arg, reply})
	}
	if e, _ := out[0].Interface().(error); e != nil {
		return e
	}
	return nil
}

// ctxType is the type of the method's context parameter.
func (m *Method) ctxType() reflect.Type {
	if m.rcvr.IsValid() {
		return m.fn.Type().In(1)
	}
	return m.fn.Type().In(0)
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// direct returns a plain Go func that calls m's function without reflect,
// and the receiver to pass it, or nil when m's signature does not allow it.
//
// reflect.Value.Call builds an argument frame, allocates the result slice
// and boxes the error on every call, a cost a small handler's entry feels.
// But the rpcx signature most services use, func(ctx context.Context, args
// *A, reply *R) error on a receiver (or as a registered function), differs
// from func(unsafe.Pointer, context.Context, unsafe.Pointer, unsafe.Pointer)
// error only in the pointers' element types, which Go passes alike: the
// func value reinterpreted as that type calls the same code the same way.
// A receiver held by value is called through its pointer method set (which
// copies the value, as a call on the value does), on a copy made here that
// nothing changes. Every other shape (an argument taken by value, a
// context parameter of a concrete type) keeps the reflect call.
func direct(m *Method) (func(unsafe.Pointer, context.Context, unsafe.Pointer, unsafe.Pointer) error, unsafe.Pointer) {
	if m.argType.Kind() != reflect.Pointer || m.replyType.Kind() != reflect.Pointer || !m.ctxIface {
		return nil, nil
	}
	fn := m.fn
	var rcvr reflect.Value
	if m.rcvr.IsValid() {
		rcvr = m.rcvr
		if rcvr.Kind() != reflect.Pointer {
			p := reflect.New(rcvr.Type())
			p.Elem().Set(rcvr)
			pm, ok := p.Type().MethodByName(m.name)
			if !ok {
				return nil, nil
			}
			fn, rcvr = pm.Func, p
		}
	}
	params := []reflect.Type{contextType, m.argType, m.replyType}
	if rcvr.IsValid() {
		params = append([]reflect.Type{rcvr.Type()}, params...)
	}
	ft := fn.Type()
	if ft.NumIn() != len(params) || ft.NumOut() != 1 || ft.Out(0) != errorType || ft.IsVariadic() {
		return nil, nil
	}
	for i, p := range params {
		if ft.In(i) != p {
			return nil, nil
		}
	}
	fi := fn.Interface()
	// An interface holding a func keeps the func value itself in its data
	// word (func values are pointer-shaped).
	data := (*[2]unsafe.Pointer)(unsafe.Pointer(&fi))[1]
	if rcvr.IsValid() {
		return *(*func(unsafe.Pointer, context.Context, unsafe.Pointer, unsafe.Pointer) error)(unsafe.Pointer(&data)), rcvr.UnsafePointer()
	}
	call := *(*func(context.Context, unsafe.Pointer, unsafe.Pointer) error)(unsafe.Pointer(&data))
	return func(_ unsafe.Pointer, ctx context.Context, arg, reply unsafe.Pointer) error {
		return call(ctx, arg, reply)
	}, nil
}
