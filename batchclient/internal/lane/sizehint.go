package lane

import (
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// knownSize is the size of the entry that Submit is about to encode, when
// it is known before encoding (its metadata aside), else 0: the payload
// of a Send, and of any call whose codec is SerializeNone, is its []byte
// argument as it is.
//
// Admission reserves at least that much. On the guess alone (the size of
// the entry last queued), a burst of callers with large byte payloads
// after small entries all passed admission at once and each encoded its
// payload, many times the queue's byte bound held for an instant.
func (l *Lane) knownSize(kind codec.Kind, call *client.Call) int {
	if kind != codec.KindSend && l.cfg.SerializeType != protocol.SerializeNone {
		return 0
	}
	var n int
	switch b := call.Args.(type) {
	case []byte:
		n = len(b)
	case *[]byte:
		if b == nil {
			return 0
		}
		n = len(*b)
	default:
		return 0
	}
	return n + codec.EntrySize(&codec.Entry{ServicePath: call.ServicePath, ServiceMethod: call.ServiceMethod})
}
