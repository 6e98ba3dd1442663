package group

import (
	"reflect"
	"sync"

	"github.com/smallnest/rpcx/codec"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
)

// sizeHints holds, per argument type, the size of its last encoding with
// rpcx's msgpack codec: a copy's buffer is made that size at once rather
// than grown from nothing (five allocations for a 220-byte payload). Only
// for msgpack, which internal/fastcodec encodes straight into the buffer;
// another codec makes its own bytes, which a buffer of ours would only
// copy. Keys are the program's argument types, a bounded set.
var sizeHints sync.Map // reflect.Type → int

// sizeHint returns the capacity to encode a value of t with, 0 for none.
func sizeHint(st protocol.SerializeType, t reflect.Type) int {
	if !appendsInPlace(st) {
		return 0
	}
	n, _ := sizeHints.Load(t)
	size, _ := n.(int)
	return size
}

// noteSize records the size of an encoding of a value of t when it
// differs much from the hint (larger, or under half).
func noteSize(st protocol.SerializeType, t reflect.Type, size int) {
	if !appendsInPlace(st) {
		return
	}
	old := sizeHint(st, t)
	if size > old || size < old/2 {
		sizeHints.Store(t, size)
	}
}

// appendsInPlace reports whether st is rpcx's msgpack codec, which
// internal/fastcodec encodes into the caller's buffer.
func appendsInPlace(st protocol.SerializeType) bool {
	switch share.Codecs[st].(type) {
	case codec.MsgpackCodec, *codec.MsgpackCodec:
		return true
	}
	return false
}
