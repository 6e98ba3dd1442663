package group

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/invoke"
)

// local runs calls to the local node in-process: the services registered
// with WithLocal, with rpcx's method convention func(ctx context.Context,
// args *A, reply *R) error, called as batchserver calls them (invoke: the
// common shape without reflect).
type local struct {
	addr     string
	st       protocol.SerializeType              // the Caller's codec, which converts types as the wire would
	services map[string]map[string]invoke.Method // service → method
}

var (
	typeOfError   = reflect.TypeFor[error]()
	typeOfContext = reflect.TypeFor[context.Context]()
)

// newLocal checks every service and collects its rpcx-shaped methods;
// arguments and replies of other types than a method's are converted with
// the codec of st.
func newLocal(addr string, st protocol.SerializeType, services map[string]any) (*local, error) {
	l := &local{addr: addr, st: st, services: make(map[string]map[string]invoke.Method, len(services))}
	for name, rcvr := range services {
		v := reflect.ValueOf(rcvr)
		if !v.IsValid() {
			return nil, fmt.Errorf("group: WithLocal: service %q is nil", name)
		}
		methods := make(map[string]invoke.Method)
		t := v.Type()
		for i := 0; i < t.NumMethod(); i++ {
			m := t.Method(i)
			if m.IsExported() && rpcxShaped(m.Type) {
				methods[m.Name] = invoke.Bind(m.Func, v, m.Name, m.Type.In(2), m.Type.In(3))
			}
		}
		if len(methods) == 0 {
			return nil, fmt.Errorf("group: WithLocal: service %q (%T) has no method of the form func(context.Context, *Args, *Reply) error", name, rcvr)
		}
		l.services[name] = methods
	}
	return l, nil
}

// rpcxShaped reports whether a method type (receiver included) is
// func(recv, context.Context, A, *R) error.
func rpcxShaped(t reflect.Type) bool {
	return t.NumIn() == 4 && t.NumOut() == 1 &&
		t.In(1) == typeOfContext && t.In(3).Kind() == reflect.Pointer &&
		t.Out(0) == typeOfError
}

// errLocalNoMethod is the cause when the local node lacks the method:
// its service was not given to WithLocal.
var errLocalNoMethod = errors.New("group: local node has no such service or method")

// call runs service.method in-process. A returned error and a panic
// (as *PanicError) are the handler's rejection.
func (l *local) call(ctx context.Context, service, method string, args, reply any) (err error) {
	m, ok := l.services[service][method]
	if !ok {
		return fmt.Errorf("%w: %s.%s", errLocalNoMethod, service, method)
	}
	argv, err := l.convertArg(args, m.ArgType())
	if err != nil {
		return err
	}
	replyv, copyBack := replyValue(reply, m.ReplyType())
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r}
		}
	}()
	if err := m.Call(ctx, argv, replyv); err != nil {
		return err
	}
	if copyBack {
		if err := transcode(l.st, replyv.Interface(), reply); err != nil {
			return fmt.Errorf("group: local call: %w", err)
		}
	}
	return nil
}

// convertArg gives args the method's argument type: as is, by address or
// by dereference when only a pointer level differs, and through the
// Caller's codec otherwise (as the wire would).
func (l *local) convertArg(args any, want reflect.Type) (reflect.Value, error) {
	if args == nil {
		return reflect.Zero(want), nil
	}
	v := reflect.ValueOf(args)
	switch {
	case v.Type() == want:
		return v, nil
	case want.Kind() == reflect.Pointer && v.Type() == want.Elem():
		p := reflect.New(want.Elem())
		p.Elem().Set(v)
		return p, nil
	case v.Kind() == reflect.Pointer && v.Type().Elem() == want:
		return v.Elem(), nil
	}
	target := reflect.New(want)
	if want.Kind() == reflect.Pointer {
		target = reflect.New(want.Elem())
	}
	if err := transcode(l.st, args, target.Interface()); err != nil {
		return reflect.Value{}, fmt.Errorf("group: local call: %w", err)
	}
	if want.Kind() == reflect.Pointer {
		return target, nil
	}
	return target.Elem(), nil
}

// replyValue returns the value to pass as the method's reply, and whether
// it must be copied into reply afterwards (a different type, or none).
func replyValue(reply any, want reflect.Type) (reflect.Value, bool) {
	if reply != nil && reflect.TypeOf(reply) == want {
		return reflect.ValueOf(reply), false
	}
	return reflect.New(want.Elem()), reply != nil
}
