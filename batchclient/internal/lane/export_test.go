package lane

import (
	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// UnreadBytes exposes unreadBytes to the external tests.
var UnreadBytes = unreadBytes

// ByteWindowFit is how many entries of the given encoded sizes a lane's
// writer sends now as one frame, with a byte window of limit (0: none)
// and inflight bytes unanswered, under a frame cap of frameBytes.
func ByteWindowFit(limit, inflight int64, frameBytes int, sizes ...int) int {
	w := byteWindow{limit: limit}
	w.inflight.Store(inflight)
	out := make([]*entry, len(sizes))
	for i, s := range sizes {
		out[i] = &entry{size: s}
	}
	return w.fit(out, frameBytes)
}

// ByteWindowWriterWaits reports whether a lane's writer, holding one Call
// entry whose arguments it has not encoded yet (the byte window was full
// when it looked), waits for a credit, with a byte window of limit and
// inflight bytes unanswered now.
func ByteWindowWriterWaits(limit, inflight int64) bool {
	l := &Lane{frameBytes: 1 << 20, bw: byteWindow{limit: limit}}
	l.bw.inflight.Store(inflight)
	e := &entry{deferred: true, size: 100}
	n, again := l.fitWindow([]*entry{e})
	return n == 0 && !again && l.bw.stalled.Load()
}

// MaxBatchHeader is the most bytes a batch frame's header takes.
const MaxBatchHeader = maxBatchHeader

// AdmittedToEncode is how many callers submitting an entry of kind with
// args a lane admits to encode before any of them has queued it: a lane
// with a queue of queueBytes (fail-fast, so that the one that finds it
// full fails instead of waiting), whose last queued entry had lastSize
// bytes. It stops at limit.
func AdmittedToEncode(queueBytes, lastSize int, st protocol.SerializeType, kind codec.Kind, args any, limit int) int {
	l := &Lane{
		cfg: Config{
			QueueEntries: limit + 1, QueueBytes: queueBytes, FailFast: true, SerializeType: st,
			Metrics: Metrics{ErrOverload: metrics.NilCounter{}},
		},
		room: make(chan struct{}),
		dead: make(chan struct{}),
	}
	l.lastSize.Store(int64(lastSize))
	call := &client.Call{ServicePath: "Holder", ServiceMethod: "Take", Args: args}
	n := 0
	for ; n < limit; n++ {
		if _, err := l.admit(l.knownSize(kind, call), nil, nil); err != nil {
			break
		}
	}
	return n
}
