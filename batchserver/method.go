package batchserver

import (
	"reflect"
	"sync"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/internal/invoke"
)

// method is one callable of an rpcx service (see invoke.Method) with the
// pools its arguments and replies are reused from.
type method struct {
	invoke.Method

	// argPool and replyPool, set when the argument's or the reply's
	// pointer type has a Reset method (rpcx's server.Reset), reuse them from
	// call to call, as rpcx does for a plain request; argPtr and replyPtr
	// are those pointer types.
	argPool, replyPool *sync.Pool
	argPtr, replyPtr   reflect.Type

	// function says it was registered with RegisterFunction: rpcx sends
	// no reply beside a function's error (handleRequestForFunction), where
	// it sends a method's.
	function bool
	// panicName is the method's name in the error a panic becomes, as
	// rpcx names it (server/service.go): the method's name, or for a
	// function the %s of its runtime.Func.
	panicName string
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
	if m.ArgType().Kind() == reflect.Pointer {
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
	return reflect.New(m.ReplyType().Elem())
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
