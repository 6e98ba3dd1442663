package lane

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// The queue's entries, pooled, and the hand-over of a Call's arguments
// between its caller and the writer (see Deferred).

// entry is one queued request: the wire entry plus what the writer needs to
// finish it (the caller's deadline, to send the time left) and its encoded
// size for the queue's byte accounting.
type entry struct {
	codec.Entry
	deadline time.Time
	size     int
	// gain is what the payload gains in inflating when it is compressed
	// (compressEntry): the server counts the entry's bytes inflated.
	gain int
	// buf is the payload's storage, kept with the pooled entry so that
	// the next entry encodes into it without allocating.
	buf []byte

	// A synchronous Call's arguments are encoded by the lane's writer, not
	// by the caller (see Submit; batchclient's Client.Call): deferred is set, args holds them
	// until then, and argState hands them over between the two. Such an
	// entry belongs to its caller, who returns it to the pool.
	deferred bool
	args     any
	argState atomic.Int32
}

// States of a deferred entry's arguments (entry.argState).
const (
	argsQueued    int32 = iota // not yet taken by the writer
	argsEncoding               // the writer is encoding them
	argsWithdrawn              // the caller returned before the entry was written; the writer drops the entry
	argsEncoded                // encoded: the caller's arguments are free again
	argsDone                   // the writer is done with the entry
)

// withdraw is called by a deferred entry's caller when its call is over,
// however it ended. It returns once the writer no longer reads the
// arguments, and recycles the entry when the writer is done with it too.
func (e *entry) withdraw() {
	if e.argState.CompareAndSwap(argsQueued, argsWithdrawn) {
		return // the writer drops it, and recycles it
	}
	for e.argState.Load() == argsEncoding {
		// Encoding takes microseconds; this only happens when the call
		// ended (context, lost lane) in the middle of it.
		runtime.Gosched()
	}
	if e.argState.CompareAndSwap(argsEncoded, argsWithdrawn) {
		// Encoded and held back by the byte window: the call is over, so
		// it is not written either; the writer drops it, and recycles
		// it, on its next look.
		return
	}
	if e.argState.Load() == argsDone {
		putEntry(e)
	}
}

// maxKeptPayload is the largest payload buffer a pooled entry keeps: under
// overload every queued entry returns one to the pool, and large ones
// would make the pool hold payload-sized memory per caller.
const maxKeptPayload = 4 << 10

// entryPool holds the entries of casts, sends and Go calls, encoded by
// their callers, each with its payload buffer; callEntryPool those of
// Call, encoded by the socket's owner, which gives their buffers to the
// next Call entries (argbufs.go) and so returns them without one. Apart,
// a cast after a Call still finds an entry with a buffer.
var (
	entryPool     = sync.Pool{New: func() any { return new(entry) }}
	callEntryPool = sync.Pool{New: func() any { return new(entry) }}
)

// minPayloadBuf is the least a fresh entry's payload buffer starts with.
const minPayloadBuf = 64

// newPayloadBuf is the payload buffer of an entry that has none (a fresh
// one: the pool loses its entries at each collection), sized as the
// payload last encoded, within maxKeptPayload: the codec then appends into
// it once instead of growing it from nothing (16, 32, 64 ... bytes: five
// allocations for a 220-byte payload).
func (l *Lane) newPayloadBuf() []byte {
	n := min(max(int(l.payloadHint.Load()), minPayloadBuf), maxKeptPayload)
	return make([]byte, 0, n)
}

// notePayload records n, the size of a payload just encoded, as the
// hint for fresh buffers; written only when it changes, so that callers
// encoding same-sized payloads share the cache line read-only.
func (l *Lane) notePayload(n int) {
	if int64(n) != l.payloadHint.Load() {
		l.payloadHint.Store(int64(n))
	}
}

func getEntry() *entry { return entryPool.Get().(*entry) }

// getCallEntry is a pooled entry for a Call (newDeferredEntry).
func getCallEntry() *entry { return callEntryPool.Get().(*entry) }

// putEntry returns e to its pool once its payload has been copied into a
// frame (or it was never sent).
func putEntry(e *entry) {
	buf, deferred := e.buf, e.deferred
	*e = entry{}
	if cap(buf) <= maxKeptPayload {
		e.buf = buf[:0]
	}
	if deferred {
		callEntryPool.Put(e)
		return
	}
	entryPool.Put(e)
}
