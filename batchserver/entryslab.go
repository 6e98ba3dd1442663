package batchserver

import (
	"math/bits"
	"sync"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// A frame's decoded entries live in one slice, which the frame's entries
// use until the last of them finishes (frameHold). Made per frame, those
// slices were a tenth of what the server allocated per call under load
// (about 110 bytes an entry), and a server's heap is mostly such garbage:
// they go back to a pool when the frame is done, one pool per power of two
// of room, and the next frame of about that size decodes into one.

// maxSlabShift bounds the pooled slices at 1<<maxSlabShift entries (the
// default BatchCap fits); a larger frame's slice is made and left to the
// collector.
const maxSlabShift = 10

// entrySlab is a pooled slice of entries; the pools keep pointers to
// slabs, so that a Put stores no new interface box.
type entrySlab struct{ entries []codec.Entry }

// slabPools holds the slabs of room 1<<i at index i.
var slabPools [maxSlabShift + 1]sync.Pool

// slabFor returns a slab with room for n entries, from the pools when n
// is small enough to be pooled, else nil.
func slabFor(n int) *entrySlab {
	if n <= 0 || n > 1<<maxSlabShift {
		return nil
	}
	shift := bits.Len(uint(n - 1)) // the smallest power of two ≥ n
	if s, ok := slabPools[shift].Get().(*entrySlab); ok {
		return s
	}
	return &entrySlab{entries: make([]codec.Entry, 0, 1<<shift)}
}

// release clears the slab's entries, so that the pool holds on to no
// metadata or names, and puts it back. The caller is the last user of
// every entry in it. Past its length the slab is clear already: each use
// decodes into its first entries, and is cleared as far as it went.
func (s *entrySlab) release() {
	if s == nil {
		return
	}
	clear(s.entries)
	s.entries = s.entries[:0]
	slabPools[bits.Len(uint(cap(s.entries)-1))].Put(s)
}

// decodeFrame decodes a batch frame into a pooled slab, which the caller
// releases once every entry is done with (or at once, on an error); the
// slab is nil when the frame's entries did not fit one.
func decodeFrame(frame []byte, maxEntries int) (seq uint64, entries []codec.Entry, slab *entrySlab, err error) {
	seq, entries, err = codec.DecodeBatchTo(frame, maxEntries, func(n int) []codec.Entry {
		if slab = slabFor(n); slab == nil {
			return nil
		}
		return slab.entries
	})
	if err != nil {
		if slab != nil {
			// The decode stopped part way: clear as far as it may
			// have gone.
			slab.entries = slab.entries[:cap(slab.entries)]
			slab.release()
		}
		return 0, nil, nil, err
	}
	if slab != nil {
		slab.entries = entries
	}
	return seq, entries, slab, nil
}
