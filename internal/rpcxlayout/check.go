package rpcxlayout

import (
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
)

// Check returns a LayoutError for every field this package reads that is
// not laid out as in rpcx v1.9.4 (and, for unregisterAllOnce's done flag,
// as in this Go's sync.Once); none when all are.
func Check() []error {
	var errs []error
	want := func(t reflect.Type, name string, w reflect.Type) {
		if err := checkField(t, name, w); err != nil {
			errs = append(errs, err)
		}
	}
	srv := reflect.TypeFor[server.Server]()
	want(srv, "serviceMapMu", reflect.TypeFor[sync.RWMutex]())
	want(srv, "inShutdown", reflect.TypeFor[int32]())
	want(srv, "handlerMsgNum", reflect.TypeFor[int32]())
	want(srv, "mu", reflect.TypeFor[sync.RWMutex]())
	want(srv, "unregisterAllOnce", reflect.TypeFor[sync.Once]())
	want(reflect.TypeFor[sync.Once](), "done", reflect.TypeFor[atomic.Bool]())
	want(srv, "pool", reflect.TypeFor[server.WorkerPool]())
	want(srv, "readTimeout", reflect.TypeFor[time.Duration]())
	want(srv, "writeTimeout", reflect.TypeFor[time.Duration]())
	want(srv, "router", reflect.TypeFor[map[string]server.Handler]())
	want(reflect.TypeFor[share.Context](), "tagsLock", reflect.TypeFor[*sync.Mutex]())
	want(reflect.TypeFor[server.RpcServiceInternalError](), "stack", reflect.TypeFor[string]())
	if xt := xClientType(); xt == nil {
		errs = append(errs, &LayoutError{Struct: "client.xClient", Field: "", Want: "client.NewXClient's struct", Found: "none"})
	} else {
		want(xt, "mu", reflect.TypeFor[sync.RWMutex]())
		want(xt, "selector", reflect.TypeFor[client.Selector]())
	}

	// The service table: map[string]*service, and in a service the maps of
	// *methodType and *functionType.
	svc, err := mapOfStructs(srv, "serviceMap")
	if err != nil {
		return append(errs, err)
	}
	want(svc, "rcvr", reflect.TypeFor[reflect.Value]())
	rtype := reflect.TypeFor[reflect.Type]()
	for _, m := range []struct {
		table, fn string
		fnType    reflect.Type
	}{
		{"method", "method", reflect.TypeFor[reflect.Method]()},
		{"function", "fn", reflect.TypeFor[reflect.Value]()},
	} {
		mt, err := mapOfStructs(svc, m.table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want(mt, m.fn, m.fnType)
		want(mt, "ArgType", rtype)
		want(mt, "ReplyType", rtype)
	}
	return errs
}

// checkField returns a LayoutError unless struct t has a field name of
// type w.
func checkField(t reflect.Type, name string, w reflect.Type) error {
	f, ok := t.FieldByName(name)
	switch {
	case !ok:
		return &LayoutError{Struct: t.String(), Field: name, Want: w.String(), Found: "no such field"}
	case f.Type != w:
		return &LayoutError{Struct: t.String(), Field: name, Want: w.String(), Found: f.Type.String()}
	}
	return nil
}

// mapOfStructs returns S when struct t has a field name of type
// map[string]*S, S a struct; a LayoutError otherwise.
func mapOfStructs(t reflect.Type, name string) (reflect.Type, error) {
	const want = "map[string]*struct"
	f, ok := t.FieldByName(name)
	if !ok {
		return nil, &LayoutError{Struct: t.String(), Field: name, Want: want, Found: "no such field"}
	}
	ft := f.Type
	if ft.Kind() != reflect.Map || ft.Key().Kind() != reflect.String || ft.Elem().Kind() != reflect.Pointer || ft.Elem().Elem().Kind() != reflect.Struct {
		return nil, &LayoutError{Struct: t.String(), Field: name, Want: want, Found: ft.String()}
	}
	return ft.Elem().Elem(), nil
}
