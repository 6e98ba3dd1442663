package lock

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestSmallMapActsAsMap runs random operations on a smallMap and on a Go
// map side by side: every read must agree, whether the key is inline or
// in the map behind it.
func TestSmallMapActsAsMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s smallMap[int]
	want := map[string]int{}
	for i := range 20000 {
		k := fmt.Sprintf("k%d", r.IntN(5))
		switch r.IntN(6) {
		case 0, 1:
			s.set(k, i)
			want[k] = i
		case 2:
			s.del(k)
			delete(want, k)
		case 3:
			if r.IntN(20) == 0 {
				s.clear()
				clear(want)
			}
		case 4:
			// Delete every other key while ranging, as releaseAllLocked
			// and undo do; update the rest.
			for k, v := range s.all() {
				if v%2 == 0 {
					s.del(k)
					delete(want, k)
				} else {
					s.set(k, v+2)
					want[k] = v + 2
				}
			}
		}
		for j := range 5 {
			k := fmt.Sprintf("k%d", j)
			got, ok := s.get(k)
			w, wok := want[k]
			if ok != wok || got != w || s.has(k) != wok {
				t.Fatalf("op %d: %s: got %d %v, want %d %v", i, k, got, ok, w, wok)
			}
		}
		if s.len() != len(want) {
			t.Fatalf("op %d: len %d, want %d", i, s.len(), len(want))
		}
		got := maps.Collect(s.all())
		if !maps.Equal(got, want) {
			t.Fatalf("op %d: all yields %v, want %v", i, got, want)
		}
	}
}

// TestSmallMapDropsForgottenKey checks that a key deleted from the inline
// entry is not kept: the entry's string would keep the key's memory alive
// for as long as its owner lives.
func TestSmallMapDropsForgottenKey(t *testing.T) {
	var s keySet
	s.set("a", struct{}{})
	s.del("a")
	if s.oneKey != "" || s.hasOne {
		t.Fatalf("inline entry kept after del: %q", s.oneKey)
	}
	s.set("b", struct{}{})
	s.clear()
	if s.oneKey != "" || s.hasOne {
		t.Fatalf("inline entry kept after clear: %q", s.oneKey)
	}
}

// TestSmallMapStopsEarly checks that all honours a loop that breaks.
func TestSmallMapStopsEarly(t *testing.T) {
	var s smallMap[int]
	for i := range 4 {
		s.set(fmt.Sprint(i), i)
	}
	n := 0
	for range s.all() {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("loop ran %d times after break, want 1", n)
	}
}
