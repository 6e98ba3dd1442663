package group

import (
	"context"
	"fmt"
	"reflect"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/selector"
)

// NewXClient wraps an rpcx XClient (plain, or batchclient.NewXClient's
// drop-in) so that its Call runs a group policy when the context carries
// one (selector.WithPolicy); calls without a policy, and every other
// method, go to xc unchanged. servicePath is xc's service; g supplies the
// nodes (build it WithDiscovery on xc's discovery to use the same servers)
// and the transport. Closing the wrapper closes xc, not g.
//
// What Call does with reply under each policy:
//
//   - CallOne, CallAny: reply (a pointer, as always) receives the winning
//     node's value; the node is not reported.
//   - CallAll, CallAllWait: reply must point to a slice of a struct with the
//     fields Node string and Value T, such as *[]group.Result[T]; it
//     receives one element per success. CallAllWait's error is the nodes'
//     failures as Rejections, nil when every node succeeded.
//   - CastOne, CastAll: reply is untouched and Call returns at once.
func NewXClient(xc client.XClient, servicePath string, g *Group) client.XClient {
	return &xClient{XClient: xc, path: servicePath, g: g}
}

type xClient struct {
	client.XClient
	path string
	g    *Group
}

// Call runs serviceMethod under the policy in ctx, or as xc would.
func (x *xClient) Call(ctx context.Context, serviceMethod string, args, reply any) error {
	p, ok := selector.PolicyFrom(ctx)
	if !ok || p == selector.Default {
		return x.XClient.Call(ctx, serviceMethod, args, reply)
	}
	switch p {
	case selector.CastOne:
		return x.g.newSpec("CastOne", x.path, serviceMethod, args, nil, nil).castOne(ctx)
	case selector.CastAll:
		return x.g.newSpec("CastAll", x.path, serviceMethod, args, nil, nil).castAll(ctx)
	case selector.CallOne, selector.CallAny:
		rv := reflect.ValueOf(reply)
		if rv.Kind() != reflect.Pointer || rv.IsNil() {
			return fmt.Errorf("group: XClient.Call under %s: reply must be a non-nil pointer, got %T", p, reply)
		}
		s := x.g.newSpec(p.String(), x.path, serviceMethod, args, newOfType(rv.Type().Elem()), nil)
		var o outcome
		var err error
		if p == selector.CallOne {
			o, err = s.callOne(ctx)
		} else {
			o, err = s.callAny(ctx)
		}
		if err != nil {
			return err
		}
		rv.Elem().Set(reflect.ValueOf(o.reply).Elem())
		return nil
	case selector.CallAll, selector.CallAllWait:
		sv, valueType, err := resultSlice(p, reply)
		if err != nil {
			return err
		}
		s := x.g.newSpec(p.String(), x.path, serviceMethod, args, newOfType(valueType), nil)
		var os []outcome
		var fail error
		if p == selector.CallAll {
			if os, err = s.callAll(ctx); err != nil {
				return err
			}
		} else {
			var errs []*NodeError
			os, errs = s.callAllWait(ctx)
			if len(errs) > 0 {
				fail = Rejections(errs)
			}
		}
		elem := sv.Type().Elem()
		for _, o := range os {
			e := reflect.New(elem).Elem()
			e.FieldByName("Node").SetString(o.node)
			e.FieldByName("Value").Set(reflect.ValueOf(o.reply).Elem())
			sv.Set(reflect.Append(sv, e))
		}
		return fail
	}
	return fmt.Errorf("group: XClient.Call: unknown policy %d", int(p))
}

// newOfType returns a constructor of *t values.
func newOfType(t reflect.Type) func() any {
	return func() any { return reflect.New(t).Interface() }
}

// resultSlice checks that reply is a pointer to a slice of structs with
// Node string and Value fields, and returns the slice and Value's type.
// The error names policy p.
func resultSlice(p selector.Policy, reply any) (reflect.Value, reflect.Type, error) {
	rv := reflect.ValueOf(reply)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Slice {
		return reflect.Value{}, nil, fmt.Errorf("group: XClient.Call under %s: reply must be a pointer to a slice such as *[]group.Result[T], got %T", p, reply)
	}
	elem := rv.Elem().Type().Elem()
	if elem.Kind() == reflect.Struct {
		node, okN := elem.FieldByName("Node")
		value, okV := elem.FieldByName("Value")
		if okN && okV && node.Type.Kind() == reflect.String && node.IsExported() && value.IsExported() {
			return rv.Elem(), value.Type, nil
		}
	}
	return reflect.Value{}, nil, fmt.Errorf("group: XClient.Call under %s: reply's elements must be structs with fields Node string and Value T, such as group.Result[T], got %T", p, reply)
}
