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
	argsWithdrawn              // the caller returned first; the writer drops the entry
	argsEncoded                // encoded: the caller's arguments are free again
	argsDone                   // the writer is done with the entry
)

// withdraw is called by a deferred entry's caller when its call is over,
// however it ended. It returns once the writer no longer reads the
// arguments, and recycles the entry when the writer is done with it too.
func (e *entry) withdraw() {
	if e.argState.CompareAndSwap(argsQueued, argsWithdrawn) {
		return // the writer will drop it; it is garbage then
	}
	for e.argState.Load() == argsEncoding {
		// Encoding takes microseconds; this only happens when the call
		// ended (context, lost lane) in the middle of it.
		runtime.Gosched()
	}
	if e.argState.Load() == argsDone {
		putEntry(e)
	}
}

// maxKeptPayload is the largest payload buffer a pooled entry keeps: under
// overload every queued entry returns one to the pool, and large ones
// would make the pool hold payload-sized memory per caller.
const maxKeptPayload = 4 << 10

var entryPool = sync.Pool{New: func() any { return new(entry) }}

func getEntry() *entry { return entryPool.Get().(*entry) }

// putEntry returns e to the pool once its payload has been copied into a
// frame (or it was never sent).
func putEntry(e *entry) {
	buf := e.buf
	*e = entry{}
	if cap(buf) <= maxKeptPayload {
		e.buf = buf[:0]
	}
	entryPool.Put(e)
}
