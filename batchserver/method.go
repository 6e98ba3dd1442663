package batchserver

import (
	"context"
	"reflect"
	"sync"
	"unsafe"

	"github.com/smallnest/rpcx/server"
)

// method is one callable of an rpcx service: a method on a receiver or a
// registered function.
type method struct {
	fn        reflect.Value
	rcvr      reflect.Value // invalid for functions
	name      string        // the method's name; empty for functions
	argType   reflect.Type
	replyType reflect.Type

	// ctxIface is whether the context parameter is context.Context.
	ctxIface bool
	// argPool and replyPool, set when the argument's or the reply's
	// pointer type has a Reset method (rpcx's server.Reset), reuse them from
	// call to call, as rpcx does for a plain request; argPtr and replyPtr
	// are those pointer types.
	argPool, replyPool *sync.Pool
	argPtr, replyPtr   reflect.Type
	// direct, when set, calls the method without reflect, on directRcvr
	// (see directCall).
	direct     func(rcvr unsafe.Pointer, ctx context.Context, arg, reply unsafe.Pointer) error
	directRcvr unsafe.Pointer
}

// newArg returns a fresh argument (or a reset one, see argPool): ptr to
// decode into, and arg to pass to the method (the pointer itself, or what
// it points to when the method takes its argument by value).
func (m *method) newArg() (ptr any, arg reflect.Value) {
	var v reflect.Value
	if m.argPool != nil {
		ptr = m.argPool.Get()
		v = reflect.ValueOf(ptr)
	} else {
		v = reflect.New(m.argPtr.Elem())
		ptr = v.Interface()
	}
	if m.argType.Kind() == reflect.Pointer {
		return ptr, v
	}
	return ptr, v.Elem()
}

// newReply returns a pointer to a fresh reply (or a reset one, see
// replyPool).
func (m *method) newReply() reflect.Value {
	if m.replyPool != nil {
		return reflect.ValueOf(m.replyPool.Get())
	}
	return reflect.New(m.replyType.Elem())
}

// recycleArg gives the argument back to argPool once the call is done
// with it, as rpcx does: reset, and only if it is of the pool's type (a
// PreCall plugin may have replaced it).
func (m *method) recycleArg(ptr any) { recycle(m.argPool, m.argPtr, ptr) }

// recycleReply gives the reply back to replyPool once it is encoded.
func (m *method) recycleReply(ptr any) { recycle(m.replyPool, m.replyPtr, ptr) }

func recycle(pool *sync.Pool, t reflect.Type, ptr any) {
	if pool == nil || ptr == nil || reflect.TypeOf(ptr) != t {
		return
	}
	ptr.(server.Reset).Reset()
	pool.Put(ptr)
}

// poolFor returns a pool of *T values for t, the pointer type *T, when *T
// has rpcx's Reset method; nil otherwise.
func poolFor(t reflect.Type) *sync.Pool {
	if !t.Implements(resetType) {
		return nil
	}
	return &sync.Pool{New: func() any { return reflect.New(t.Elem()).Interface() }}
}

var resetType = reflect.TypeFor[server.Reset]()

// invoke calls the method.
func (m *method) invoke(ctx context.Context, arg, reply reflect.Value) error {
	if m.direct != nil {
		return m.direct(m.directRcvr, ctx, arg.UnsafePointer(), reply.UnsafePointer())
	}
	return m.invokeReflect(ctx, arg, reply)
}

// invokeReflect calls the method with reflect. It is a function of its own
// because reflect makes ctx escape: in invoke, that moved ctx to the heap
// on every call, direct ones too.
func (m *method) invokeReflect(ctx context.Context, arg, reply reflect.Value) error {
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
func (m *method) ctxType() reflect.Type {
	if m.rcvr.IsValid() {
		return m.fn.Type().In(1)
	}
	return m.fn.Type().In(0)
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// directCall returns a plain Go func that calls m's function without
// reflect, and the receiver to pass it, or nil when m's signature does not
// allow it.
//
// reflect.Value.Call builds an argument frame, allocates the result slice
// and boxes the error on every call; for a small handler that was a
// twentieth of the server's CPU per entry. But the rpcx signature most
// services use, func(ctx context.Context, args *A, reply *R) error on a
// receiver (or as a registered function), differs from
// func(unsafe.Pointer, context.Context, unsafe.Pointer, unsafe.Pointer) error
// only in the pointers' element types, and Go passes every pointer the
// same way whatever it points to: reinterpreting the func value as that
// type calls the same code with the same registers and stack. A receiver
// held by value is called through its pointer method set (the method Go
// generates for *T, which copies the value, as a call on the value does),
// on a copy made here that nothing changes. Every other shape (an argument
// taken by value, a context parameter of a concrete type) keeps the
// reflect call.
func directCall(m *method) (func(unsafe.Pointer, context.Context, unsafe.Pointer, unsafe.Pointer) error, unsafe.Pointer) {
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
