package lock

import "iter"

// smallMap is a map from key to V that keeps its first entry inline, in
// its owner's own memory, and makes a map only for a second entry at
// once. It stands for two maps that hold one key at a time in the usual
// case: what an owner holds on this node (owner.held; elock's designs 1
// and 3 lock one key per request, and a proxy usually holds what one
// request took) and the keys a holder holds on another node
// (remoteHolds.keys). In design 1 each of those maps cost two allocations
// per holder (the map and its first group) and each lock two or three
// cache misses on memory no other path had touched (the map header and
// its group): holders are many, and by the time one comes back its lines
// are cold.
//
// A key is inline or in the map, never both. Its user guards it as it
// would the map it stands for.
type smallMap[V any] struct {
	oneKey string
	oneVal V
	hasOne bool
	more   map[string]V
}

// heldSet is what an owner holds on this node.
type heldSet = smallMap[heldKey]

// keySet is a set of keys.
type keySet = smallMap[struct{}]

// get returns key's entry.
func (s *smallMap[V]) get(key string) (V, bool) {
	if s.hasOne && s.oneKey == key {
		return s.oneVal, true
	}
	if s.more == nil {
		var zero V
		return zero, false
	}
	v, ok := s.more[key]
	return v, ok
}

// has reports whether key is in s.
func (s *smallMap[V]) has(key string) bool {
	_, ok := s.get(key)
	return ok
}

// set records key's entry, adding it or replacing the one there.
func (s *smallMap[V]) set(key string, v V) {
	switch {
	case s.hasOne && s.oneKey == key:
		s.oneVal = v
		return
	case len(s.more) > 0:
		if _, ok := s.more[key]; ok {
			s.more[key] = v
			return
		}
	}
	if !s.hasOne {
		s.oneKey, s.oneVal, s.hasOne = key, v, true
		return
	}
	if s.more == nil {
		s.more = make(map[string]V)
	}
	s.more[key] = v
}

// del forgets key.
func (s *smallMap[V]) del(key string) {
	if s.hasOne && s.oneKey == key {
		// The string goes too: s must not keep a forgotten key's memory
		// alive.
		var zero V
		s.oneKey, s.oneVal, s.hasOne = "", zero, false
		return
	}
	if len(s.more) > 0 {
		delete(s.more, key)
	}
}

// len returns the number of keys in s.
func (s *smallMap[V]) len() int {
	n := len(s.more)
	if s.hasOne {
		n++
	}
	return n
}

// clear forgets every key.
func (s *smallMap[V]) clear() {
	var zero V
	s.oneKey, s.oneVal, s.hasOne = "", zero, false
	clear(s.more)
}

// all yields every key and its entry. The loop body may del or set the
// key it was given, as a range over a map may, and nothing else.
func (s *smallMap[V]) all() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if s.hasOne && !yield(s.oneKey, s.oneVal) {
			return
		}
		for k, v := range s.more {
			if !yield(k, v) {
				return
			}
		}
	}
}
