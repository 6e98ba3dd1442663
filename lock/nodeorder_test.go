package lock

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNodeOrder checks nodeOrder against its definition (every node once,
// "" read as self, sorted) on random lists of up to four names with
// duplicates and "", the two-node shortcuts included.
func TestNodeOrder(t *testing.T) {
	names := []string{"", "self", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:10", "z"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		nodes := make([]string, 1+r.IntN(4))
		for i := range nodes {
			nodes[i] = names[r.IntN(len(names))]
		}
		var want []string
		for _, nd := range nodes {
			if nd == "" {
				nd = "self"
			}
			if !slices.Contains(want, nd) {
				want = append(want, nd)
			}
		}
		slices.Sort(want)
		in := slices.Clone(nodes)
		var buf [2]string
		got := nodeOrder(nodes, "self", buf[:0])
		if !slices.Equal(got, want) {
			t.Fatalf("nodeOrder(%q) = %q, want %q", in, got, want)
		}
		if !slices.Equal(nodes, in) {
			t.Fatalf("nodeOrder(%q) changed its input to %q", in, nodes)
		}
	}
}
