package lock

import (
	"sync"
	"sync/atomic"
)

// Every Acquire names its holder's node (AcquireArgs.Origin), one of a
// few addresses, and decoding it made a string per request. The decoder
// looks the bytes up in a table of the addresses seen so far instead: a
// map read with no lock and no allocation. The table is copied on write
// and holds at most internLimit addresses; past that, addresses are
// decoded as before.

const internLimit = 256

var interned struct {
	m  atomic.Pointer[map[string]string]
	mu sync.Mutex // serialises the writers
}

// internBytes returns b as a string, the same string every time for the
// addresses in the table.
func internBytes(b []byte) string {
	if m := interned.m.Load(); m != nil {
		if s, ok := (*m)[string(b)]; ok {
			return s
		}
	}
	s := string(b)
	interned.mu.Lock()
	defer interned.mu.Unlock()
	old := interned.m.Load()
	if old != nil && len(*old) >= internLimit {
		return s
	}
	m := make(map[string]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[s] = s
	interned.m.Store(&m)
	return s
}

func lenOf(m *map[string]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
