package batchserver

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/internal/invoke"
)

// serviceTable mirrors rpcx's own service map. rpcx keeps its services in
// unexported fields and offers no way to call one from outside; reading them
// is the only way to run a batched entry exactly as rpcx would run it (same
// method set, RegisterWithMethods filters, functions), including services
// registered before the plugin existed. The layout read here is that of
// rpcx v1.9.4, which go.mod pins; New fails with ErrUnsupportedRPCX if it
// ever changes, rather than guessing.
type serviceTable struct {
	s  *server.Server
	mu sync.RWMutex // guards cache and gen
	// cache holds what was read, per service path; it is dropped by the
	// Register and Unregister hooks so a re-registration is seen.
	cache map[string]map[string]*method
	// gen counts those hooks. rpcx changes its table and then calls the
	// hook, so a read that raced with the change may hold the old service:
	// it is cached only if no hook ran since it began.
	gen uint64
}

// ErrUnsupportedRPCX reports an rpcx whose service table is not laid out as
// in v1.9.4; pin github.com/smallnest/rpcx v1.9.4.
var ErrUnsupportedRPCX = errors.New("rpcxbatch: cannot read the rpcx server's service table; this batchserver supports github.com/smallnest/rpcx v1.9.4")

func newServiceTable(s *server.Server) (*serviceTable, error) {
	t := &serviceTable{s: s, cache: make(map[string]map[string]*method)}
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
	t.mu.RLock()
	methods, ok := t.cache[service]
	gen := t.gen
	t.mu.RUnlock()
	if !ok {
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
	if t.gen == gen {
		t.cache[service] = methods
	}
	t.mu.Unlock()
}

// forget drops the cached copy of a service after rpcx changed it.
func (t *serviceTable) forget(service string) {
	t.mu.Lock()
	delete(t.cache, service)
	t.gen++
	t.mu.Unlock()
}

// field returns a usable (not read-only) view of an unexported struct field.
func field(v reflect.Value, name string) (reflect.Value, bool) {
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}, false
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), true
}

// read copies one service out of rpcx's table under rpcx's own lock. It
// returns nil, nil when the service does not exist.
func (t *serviceTable) read(name string) (map[string]*method, error) {
	sv := reflect.ValueOf(t.s).Elem()
	muV, ok1 := field(sv, "serviceMapMu")
	mapV, ok2 := field(sv, "serviceMap")
	if !ok1 || !ok2 || muV.Type() != reflect.TypeFor[sync.RWMutex]() || mapV.Kind() != reflect.Map {
		return nil, ErrUnsupportedRPCX
	}
	mu := muV.Addr().Interface().(*sync.RWMutex)
	mu.RLock()
	defer mu.RUnlock()
	svc := mapV.MapIndex(reflect.ValueOf(name))
	if !svc.IsValid() || svc.IsNil() {
		return nil, nil
	}
	svc = svc.Elem()
	rcvrV, ok1 := field(svc, "rcvr")
	methodsV, ok2 := field(svc, "method")
	funcsV, ok3 := field(svc, "function")
	if !ok1 || !ok2 || !ok3 || rcvrV.Type() != reflect.TypeFor[reflect.Value]() {
		return nil, ErrUnsupportedRPCX
	}
	rcvr := rcvrV.Interface().(reflect.Value)
	out := make(map[string]*method, methodsV.Len()+funcsV.Len())
	for it := methodsV.MapRange(); it.Next(); {
		mt := it.Value().Elem()
		mV, ok := field(mt, "method")
		if !ok || mV.Type() != reflect.TypeFor[reflect.Method]() {
			return nil, ErrUnsupportedRPCX
		}
		rm := mV.Interface().(reflect.Method)
		m, err := typed(mt, rm.Func, rcvr, rm.Name)
		if err != nil {
			return nil, err
		}
		out[it.Key().String()] = m
	}
	for it := funcsV.MapRange(); it.Next(); {
		ft := it.Value().Elem()
		fV, ok := field(ft, "fn")
		if !ok || fV.Type() != reflect.TypeFor[reflect.Value]() {
			return nil, ErrUnsupportedRPCX
		}
		m, err := typed(ft, fV.Interface().(reflect.Value), reflect.Value{}, "")
		if err != nil {
			return nil, err
		}
		// rpcx looks methods up before functions; keep that precedence.
		if _, dup := out[it.Key().String()]; !dup {
			out[it.Key().String()] = m
		}
	}
	return out, nil
}

// typed reads the argument and reply types of rpcx's method type v and
// binds the caller of fn (on rcvr, named name: see invoke.Bind).
func typed(v reflect.Value, fn, rcvr reflect.Value, name string) (*method, error) {
	a, ok1 := field(v, "ArgType")
	r, ok2 := field(v, "ReplyType")
	if !ok1 || !ok2 {
		return nil, ErrUnsupportedRPCX
	}
	argType, _ := a.Interface().(reflect.Type)
	replyType, _ := r.Interface().(reflect.Type)
	if argType == nil || replyType == nil || replyType.Kind() != reflect.Pointer || !fn.IsValid() {
		return nil, fmt.Errorf("%w (method types unreadable)", ErrUnsupportedRPCX)
	}
	m := &method{Method: invoke.Bind(fn, rcvr, name, argType, replyType)}
	m.argPtr, m.replyPtr = argType, replyType
	if argType.Kind() != reflect.Pointer {
		m.argPtr = reflect.PointerTo(argType)
	}
	m.argPool, m.replyPool = poolFor(m.argPtr), poolFor(m.replyPtr)
	return m, nil
}
