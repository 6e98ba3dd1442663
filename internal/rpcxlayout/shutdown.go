package rpcxlayout

import (
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/smallnest/rpcx/server"
)

// Shutdown points at the fields of an rpcx server that graceful shutdown
// reads and counts in.
type Shutdown struct {
	// InShutdown is 1 once the server's Shutdown has begun.
	InShutdown *int32
	// HandlerMsgNum is the count of requests in flight Shutdown waits for.
	HandlerMsgNum *int32
	// Mu is held by Shutdown from before the Unregister hooks until every
	// connection has stopped reading.
	Mu *sync.RWMutex
	// UnregisteredAll is the done flag of the server's unregisterAllOnce,
	// set once UnregisterAll has run; nil when this Go's sync.Once is laid
	// out otherwise.
	UnregisteredAll *atomic.Bool
}

// ReadShutdown returns s's shutdown fields; false when inShutdown,
// handlerMsgNum or mu is not as in rpcx v1.9.4 (UnregisteredAll is then
// left nil only).
func ReadShutdown(s *server.Server) (Shutdown, bool) {
	sv := reflect.ValueOf(s).Elem()
	in, ok1 := field(sv, "inShutdown")
	n, ok2 := field(sv, "handlerMsgNum")
	mu, ok3 := field(sv, "mu")
	i32 := reflect.TypeFor[int32]()
	if !ok1 || !ok2 || !ok3 || in.Type() != i32 || n.Type() != i32 || mu.Type() != reflect.TypeFor[sync.RWMutex]() {
		return Shutdown{}, false
	}
	rs := Shutdown{
		InShutdown:    in.Addr().Interface().(*int32),
		HandlerMsgNum: n.Addr().Interface().(*int32),
		Mu:            mu.Addr().Interface().(*sync.RWMutex),
	}
	if once, ok := field(sv, "unregisterAllOnce"); ok && once.Type() == reflect.TypeFor[sync.Once]() {
		if done, ok := field(once, "done"); ok && done.Type() == reflect.TypeFor[atomic.Bool]() {
			rs.UnregisteredAll = done.Addr().Interface().(*atomic.Bool)
		}
	}
	return rs, true
}
