package invoke

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

type args struct{ A, B int }
type reply struct{ C int }

type ptrSvc struct{ add int }

func (s *ptrSvc) Mul(_ context.Context, a *args, r *reply) error {
	if a.A < 0 {
		return errors.New("negative")
	}
	r.C = a.A*a.B + s.add
	return nil
}

func (s *ptrSvc) ByValue(_ context.Context, a args, r *reply) error {
	r.C = a.A*a.B + s.add
	return nil
}

type ctxKey struct{}

// Concrete takes a context of a concrete type (rpcx accepts
// *share.Context); it reads a value through it.
func (s *ptrSvc) Concrete(ctx *valueCtx, a *args, r *reply) error {
	r.C = a.A*a.B + ctx.Value(ctxKey{}).(int)
	return nil
}

type valueCtx struct{ context.Context }

type valSvc struct{ add int }

func (v valSvc) Mul(_ context.Context, a *args, r *reply) error {
	r.C = a.A*a.B + v.add
	return nil
}

func mulFn(_ context.Context, a *args, r *reply) error {
	r.C = a.A * a.B
	return nil
}

// bindMethod binds rcvr's method name as batchserver does from rpcx's
// service map.
func bindMethod(t *testing.T, rcvr any, name string) Method {
	t.Helper()
	v := reflect.ValueOf(rcvr)
	rm, ok := v.Type().MethodByName(name)
	if !ok {
		t.Fatalf("no method %s", name)
	}
	return Bind(rm.Func, v, rm.Name, rm.Type.In(2), rm.Type.In(3))
}

// Every shape rpcx accepts is called, the common ones without reflect,
// with the same results and errors.
func TestCallEveryShape(t *testing.T) {
	fnV := reflect.ValueOf(mulFn)
	vctx := &valueCtx{context.WithValue(context.Background(), ctxKey{}, 100)}
	for _, tc := range []struct {
		name   string
		m      Method
		ctx    any
		byVal  bool
		direct bool
		want   int
	}{
		{"pointer receiver", bindMethod(t, &ptrSvc{add: 1}, "Mul"), context.Background(), false, true, 43},
		{"argument by value", bindMethod(t, &ptrSvc{add: 1}, "ByValue"), context.Background(), true, false, 43},
		{"concrete context", bindMethod(t, &ptrSvc{add: 1}, "Concrete"), vctx, false, false, 142},
		{"value receiver", bindMethod(t, valSvc{add: 2}, "Mul"), context.Background(), false, true, 44},
		{"function", Bind(fnV, reflect.Value{}, "", fnV.Type().In(1), fnV.Type().In(2)), context.Background(), false, true, 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.Direct(); got != tc.direct {
				t.Errorf("Direct() = %v, want %v", got, tc.direct)
			}
			arg := reflect.ValueOf(&args{A: 6, B: 7})
			if tc.byVal {
				arg = arg.Elem()
			}
			r := &reply{}
			ctx, _ := tc.ctx.(context.Context)
			if err := tc.m.Call(ctx, arg, reflect.ValueOf(r)); err != nil {
				t.Fatal(err)
			}
			if r.C != tc.want {
				t.Errorf("reply %d, want %d", r.C, tc.want)
			}
		})
	}
	m := bindMethod(t, &ptrSvc{}, "Mul")
	if err := m.Call(context.Background(), reflect.ValueOf(&args{A: -1}), reflect.ValueOf(&reply{})); err == nil || err.Error() != "negative" {
		t.Errorf("the handler's error came back as %v", err)
	}
}
