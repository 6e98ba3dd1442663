package lock

// rowIndex is a shard's rows by key: an open-addressing table with linear
// probing whose slots hold the key's hash beside the row.
//
// It replaces a Go map for the cache's sake: with many holders the table
// is out of the cache by the time a key comes back, and a map lookup
// walked from the map's header to its table, its group's control word, the
// slot's key and the key's bytes before it reached the row. Here a lookup
// reads one line of slots (the hashes tell a different key apart without
// touching it) and, for a key that is there, the row and the key's bytes.
//
// Deleting shifts the following slots back (no tombstones), so a probe
// ends at the first empty slot. The table doubles past half full and
// halves below an eighth, so a burst's memory is given back.
type rowIndex struct {
	slots []rowSlot // nil, or a power of two long
	n     int       // rows in slots
}

// rowSlot is one slot: empty when r is nil.
type rowSlot struct {
	hash uint64
	r    *row
}

// minRowSlots is the smallest table made.
const minRowSlots = 16

// home is the slot a hash probes first. The low bits chose the shard
// (table.shard), so the index takes the bits above them.
func (x *rowIndex) home(hash uint64) int {
	return int(hash>>shardBits) & (len(x.slots) - 1)
}

// get returns key's row, or nil.
func (x *rowIndex) get(hash uint64, key string) *row {
	if x.n == 0 {
		return nil
	}
	mask := len(x.slots) - 1
	for i := x.home(hash); ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.r == nil {
			return nil
		}
		if s.hash == hash && s.r.key == key {
			return s.r
		}
	}
}

// put adds r, whose key (r.key, r.hash) must not be in x.
func (x *rowIndex) put(r *row) {
	if 2*(x.n+1) > len(x.slots) {
		x.resize(max(minRowSlots, 2*len(x.slots)))
	}
	x.insert(rowSlot{r.hash, r})
	x.n++
}

func (x *rowIndex) insert(s rowSlot) {
	mask := len(x.slots) - 1
	i := x.home(s.hash)
	for x.slots[i].r != nil {
		i = (i + 1) & mask
	}
	x.slots[i] = s
}

// del removes r, which must be in x.
func (x *rowIndex) del(r *row) {
	mask := len(x.slots) - 1
	i := x.home(r.hash)
	for x.slots[i].r != r {
		i = (i + 1) & mask
	}
	// Shift back every later slot of the run that may sit at i: one whose
	// home is not cyclically within (i, j] (Knuth's algorithm R).
	for j := (i + 1) & mask; x.slots[j].r != nil; j = (j + 1) & mask {
		k := x.home(x.slots[j].hash)
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		x.slots[i] = x.slots[j]
		i = j
	}
	x.slots[i] = rowSlot{}
	x.n--
	if len(x.slots) > minRowSlots && 8*x.n < len(x.slots) {
		x.resize(len(x.slots) / 2)
	}
}

// resize moves the rows to a table of size slots.
func (x *rowIndex) resize(size int) {
	old := x.slots
	x.slots = make([]rowSlot, size)
	for _, s := range old {
		if s.r != nil {
			x.insert(s)
		}
	}
}
