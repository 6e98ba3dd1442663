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
// arrives. Only its Client.Call forgets a call whose context ended, and
// that path races with rpcx's own send goroutine (it reads the sequence
// number send may still be writing), so plain calls here wait on Go
// instead. Without a copy, a reply arriving after the context ended would
// be written into the caller's value after the call returned, while the
// caller may be reading or reusing it. The copy is a fresh zero value, not
// a copy of the caller's: msgpack decodes into the room of a slice, the
// entries of a map and the target of a pointer the value already holds, so
// a shallow copy would still share them. The one difference from decoding
// in place: a field the reply does not carry ends zero, where rpcx leaves
// the caller's value. A context that cannot end, a nil reply (a oneway
// call) or a reply that is not a non-nil pointer needs no copy.
func ReplyCopy(ctx context.Context, reply any) (dst any, commit func()) {
	if reply == nil || ctx.Done() == nil {
		return reply, noCommit
	}
	rv := reflect.ValueOf(reply)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return reply, noCommit
	}
	cp := reflect.New(rv.Elem().Type())
	return cp.Interface(), func() { rv.Elem().Set(cp.Elem()) }
}

// noCommit is ReplyCopy's commit when reply is decoded in place.
func noCommit() {}
