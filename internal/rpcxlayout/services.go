package rpcxlayout

import (
	"reflect"
	"sync"

	"github.com/smallnest/rpcx/server"
)

// Method is a method or function of an rpcx service as rpcx's service
// table holds it.
type Method struct {
	// Fn is the method's function (the receiver its first argument) or the
	// registered function.
	Fn reflect.Value
	// Name is the method's name; empty for a function.
	Name string
	// ArgType and ReplyType are the types rpcx decodes the arguments into
	// and the reply from; nil when rpcx holds none.
	ArgType, ReplyType reflect.Type
}

// Service is one service of an rpcx server's table.
type Service struct {
	// Rcvr is the receiver of the service's methods.
	Rcvr reflect.Value
	// Methods and Functions are keyed by the name a call gives; rpcx looks
	// a name up in Methods first.
	Methods, Functions map[string]Method
}

// ReadService copies the service name out of s's service table under
// rpcx's own lock. found is false when there is no such service; ok is
// false when the table is not laid out as in rpcx v1.9.4.
func ReadService(s *server.Server, name string) (svc Service, found, ok bool) {
	sv := reflect.ValueOf(s).Elem()
	muV, ok1 := field(sv, "serviceMapMu")
	mapV, ok2 := field(sv, "serviceMap")
	if !ok1 || !ok2 || muV.Type() != reflect.TypeFor[sync.RWMutex]() || mapV.Kind() != reflect.Map {
		return Service{}, false, false
	}
	mu := muV.Addr().Interface().(*sync.RWMutex)
	mu.RLock()
	defer mu.RUnlock()
	sp := mapV.MapIndex(reflect.ValueOf(name))
	if !sp.IsValid() || sp.IsNil() {
		return Service{}, false, true
	}
	sp = sp.Elem()
	rcvrV, ok1 := field(sp, "rcvr")
	methodsV, ok2 := field(sp, "method")
	funcsV, ok3 := field(sp, "function")
	if !ok1 || !ok2 || !ok3 || rcvrV.Type() != reflect.TypeFor[reflect.Value]() {
		return Service{}, false, false
	}
	svc = Service{
		Rcvr:      rcvrV.Interface().(reflect.Value),
		Methods:   make(map[string]Method, methodsV.Len()),
		Functions: make(map[string]Method, funcsV.Len()),
	}
	for it := methodsV.MapRange(); it.Next(); {
		mt := it.Value().Elem()
		mV, ok := field(mt, "method")
		if !ok || mV.Type() != reflect.TypeFor[reflect.Method]() {
			return Service{}, false, false
		}
		rm := mV.Interface().(reflect.Method)
		m, ok := types(mt)
		if !ok {
			return Service{}, false, false
		}
		m.Fn, m.Name = rm.Func, rm.Name
		svc.Methods[it.Key().String()] = m
	}
	for it := funcsV.MapRange(); it.Next(); {
		ft := it.Value().Elem()
		fV, ok := field(ft, "fn")
		if !ok || fV.Type() != reflect.TypeFor[reflect.Value]() {
			return Service{}, false, false
		}
		m, ok := types(ft)
		if !ok {
			return Service{}, false, false
		}
		m.Fn = fV.Interface().(reflect.Value)
		svc.Functions[it.Key().String()] = m
	}
	return svc, true, true
}

// types reads the argument and reply types of rpcx's method or function
// type v; false when it has no such fields.
func types(v reflect.Value) (Method, bool) {
	a, ok1 := field(v, "ArgType")
	r, ok2 := field(v, "ReplyType")
	if !ok1 || !ok2 {
		return Method{}, false
	}
	var m Method
	m.ArgType, _ = a.Interface().(reflect.Type)
	m.ReplyType, _ = r.Interface().(reflect.Type)
	return m, true
}
