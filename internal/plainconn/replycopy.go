package plainconn

import (
	"context"
	"reflect"
)

// ReplyCopy returns where a plain rpcx call whose context may end first
// should decode its reply, and commit, which copies it into reply once the
// call has completed.
//
// rpcx v1.9.4 decodes a reply into the value the caller passed whenever it
// arrives, and only its Client.Call takes a call whose context ended out of
// its pending map (with a data race of its own: it reads the sequence number rpcx's send
// goroutine may still be writing). A plain call that waits on Go instead, so without a copy a reply arriving after the
// context ended would be written into the caller's value after Call
// returned, while the caller may be reading or reusing it. The copy starts
// as a shallow copy of the caller's value, so that decoding into it gives
// what decoding into the caller's value would have (fields the reply does
// not carry keep their values); a map or slice the caller's value already
// held is shared, as it would be with rpcx. A context that cannot end, a
// nil reply (a oneway call) or a reply that is not a non-nil pointer needs
// no copy.
func ReplyCopy(ctx context.Context, reply any) (dst any, commit func()) {
	if reply == nil || ctx.Done() == nil {
		return reply, noCommit
	}
	rv := reflect.ValueOf(reply)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return reply, noCommit
	}
	cp := reflect.New(rv.Elem().Type())
	cp.Elem().Set(rv.Elem())
	return cp.Interface(), func() { rv.Elem().Set(cp.Elem()) }
}

// noCommit is ReplyCopy's commit when reply is decoded in place.
func noCommit() {}
