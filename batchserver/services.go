package batchserver

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/internal/invoke"
	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
)

// serviceTable mirrors rpcx's own service map. rpcx keeps its services in
// unexported fields and offers no way to call one from outside; reading them
// is the only way to run a batched entry exactly as rpcx would run it (same
// method set, RegisterWithMethods filters, functions), including services
// registered before the plugin existed. The layout read (in
// internal/rpcxlayout) is that of rpcx v1.9.4, which go.mod pins; New
// fails with ErrUnsupportedRPCX if it ever changes, rather than guessing.
type serviceTable struct {
	s *server.Server
	// cache holds what was read, per service path; a service is dropped
	// by the Register and Unregister hooks so a re-registration is seen.
	// A map once published is never changed: a change publishes a copy,
	// so the lookup of every entry reads it without a lock (a read lock
	// taken per entry by the goroutines of both cores kept its count's
	// line moving between them). Services change rarely.
	cache atomic.Pointer[map[string]map[string]*method]
	mu    sync.Mutex // serializes the hooks' and the reads' changes to cache and gen
	// gen counts those hooks. rpcx changes its table and then calls the
	// hook, so a read that raced with the change may hold the old service:
	// it is cached only if no hook ran since it began. Read without mu
	// (a lookup of a service not cached, such as an unknown one, takes no
	// lock of the plugin's), changed under it.
	gen atomic.Uint64
}

// ErrUnsupportedRPCX reports an rpcx whose server (its service table, its
// options, its shutdown state) is not laid out as in v1.9.4: this
// batchserver supports github.com/smallnest/rpcx v1.9.4; pin that version.
var ErrUnsupportedRPCX = errors.New("batchserver: cannot read the rpcx server's internals")

func newServiceTable(s *server.Server) (*serviceTable, error) {
	t := &serviceTable{s: s}
	t.cache.Store(&map[string]map[string]*method{})
	// Read every service once so a layout mismatch fails New, not a call.
	for _, name := range s.ListServices() {
		if _, err := t.read(name); err != nil {
			return nil, err
		}
	}
	if _, err := t.read("\x00probe"); err != nil {
		return nil, err
	}
	return t, nil
}

// lookup returns the callable for service.method, or nil.
func (t *serviceTable) lookup(service, name string) (m *method, serviceFound bool) {
	methods, ok := (*t.cache.Load())[service]
	if !ok {
		gen := t.gen.Load()
		var err error
		if methods, err = t.read(service); err != nil || methods == nil {
			return nil, false
		}
		t.store(service, methods, gen)
	}
	return methods[name], true
}

// store caches what a read that began at generation gen found, unless a
// hook has run since.
func (t *serviceTable) store(service string, methods map[string]*method, gen uint64) {
	t.mu.Lock()
	if t.gen.Load() == gen {
		t.publishLocked(service, methods)
	}
	t.mu.Unlock()
}

// forget drops the cached copy of a service after rpcx changed it.
func (t *serviceTable) forget(service string) {
	t.mu.Lock()
	if _, cached := (*t.cache.Load())[service]; cached {
		t.publishLocked(service, nil)
	}
	t.gen.Add(1)
	t.mu.Unlock()
}

// publishLocked publishes a copy of the cache with service's methods set,
// or dropped when methods is nil; t.mu is held.
func (t *serviceTable) publishLocked(service string, methods map[string]*method) {
	old := *t.cache.Load()
	next := make(map[string]map[string]*method, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	if methods != nil {
		next[service] = methods
	} else {
		delete(next, service)
	}
	t.cache.Store(&next)
}

// read copies one service out of rpcx's table (rpcxlayout.ReadService,
// under rpcx's own lock) and binds the caller of each method and function.
// It returns nil, nil when the service does not exist.
func (t *serviceTable) read(name string) (map[string]*method, error) {
	svc, found, ok := rpcxlayout.ReadService(t.s, name)
	if !ok {
		return nil, ErrUnsupportedRPCX
	}
	if !found {
		return nil, nil
	}
	out := make(map[string]*method, len(svc.Methods)+len(svc.Functions))
	for key, rm := range svc.Methods {
		m, err := typed(rm, svc.Rcvr)
		if err != nil {
			return nil, err
		}
		out[key] = m
	}
	for key, rf := range svc.Functions {
		m, err := typed(rf, reflect.Value{})
		if err != nil {
			return nil, err
		}
		// rpcx looks methods up before functions; keep that precedence.
		if _, dup := out[key]; !dup {
			out[key] = m
		}
	}
	return out, nil
}

// typed binds the caller of rpcx's method or function rm (on rcvr, when
// it is a method: see invoke.Bind).
func typed(rm rpcxlayout.Method, rcvr reflect.Value) (*method, error) {
	fn, name, argType, replyType := rm.Fn, rm.Name, rm.ArgType, rm.ReplyType
	if argType == nil || replyType == nil || replyType.Kind() != reflect.Pointer || !fn.IsValid() {
		return nil, fmt.Errorf("%w (method types unreadable)", ErrUnsupportedRPCX)
	}
	m := &method{Method: invoke.Bind(fn, rcvr, name, argType, replyType), function: !rcvr.IsValid(), panicName: name}
	if m.function {
		m.panicName = fmt.Sprintf("%s", runtime.FuncForPC(fn.Pointer()))
	}
	m.argPtr, m.replyPtr = argType, replyType
	if argType.Kind() != reflect.Pointer {
		m.argPtr = reflect.PointerTo(argType)
	}
	m.argPool, m.replyPool = poolFor(m.argPtr), poolFor(m.replyPtr)
	return m, nil
}
