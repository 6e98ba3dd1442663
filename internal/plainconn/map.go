package plainconn

import (
	"context"
	"sync"
)

// Map is a Slot per address, each made with the Config its config function
// gives for the address. A Map is safe for concurrent use.
type Map struct {
	config func(addr string) Config
	closed error

	// mu guards slots and done. It is never held while a slot dials or
	// closes.
	mu    sync.Mutex
	slots map[string]*Slot
	done  bool
}

// NewMap returns an empty Map whose slots are made with config(addr);
// once the Map is closed, Use returns closed.
func NewMap(closed error, config func(addr string) Config) *Map {
	return &Map{config: config, closed: closed, slots: make(map[string]*Slot)}
}

// Add returns the slot of addr, making it (empty: it dials on first use)
// when there is none; nil once the Map is closed.
func (m *Map) Add(addr string) *Slot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return nil
	}
	s := m.slots[addr]
	if s == nil {
		s = NewSlot(m.config(addr))
		m.slots[addr] = s
	}
	return s
}

// Lookup returns the slot of addr, or nil when it has none.
func (m *Map) Lookup(addr string) *Slot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.slots[addr]
}

// Use returns the client of addr in use, as Slot.Use, making its slot on
// first use; the Map's closed error once it is closed.
func (m *Map) Use(ctx context.Context, addr string) (Lease, error) {
	s := m.Add(addr)
	if s == nil {
		return Lease{}, m.closed
	}
	return s.Use(ctx)
}

// Remove takes the slot of addr out of the Map and closes it (Slot.Close).
func (m *Map) Remove(addr string) {
	m.mu.Lock()
	s := m.slots[addr]
	delete(m.slots, addr)
	m.mu.Unlock()
	if s != nil {
		s.Close()
	}
}

// Close closes every slot; later calls of Use get the Map's closed error.
// It is idempotent.
func (m *Map) Close() {
	m.mu.Lock()
	slots := m.slots
	m.slots, m.done = map[string]*Slot{}, true
	m.mu.Unlock()
	for _, s := range slots {
		s.Close()
	}
}
