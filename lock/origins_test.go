package lock

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// indexed returns how many proxies of origin's incarnation inc b's index
// holds, and checks that the index and the proxy table agree.
func indexed(t *testing.T, b *Node, origin string, inc uint64) int {
	t.Helper()
	b.mu.RLock()
	defer b.mu.RUnlock()
	total := 0
	for _, incs := range b.byOrigin {
		for _, set := range incs {
			for id, o := range set {
				if b.proxies[id] != o {
					t.Fatalf("index holds proxy %v, the proxy table %v", id, b.proxies[id])
				}
				total++
			}
		}
	}
	if total != len(b.proxies) {
		t.Fatalf("index holds %d proxies, the proxy table %d", total, len(b.proxies))
	}
	return len(b.byOrigin[origin][inc])
}

// TestOriginIndexFollowsProxies: the peer watch's index of proxies by
// origin follows the proxies as they come and go; a tick where the origin
// answers with its incarnation drops nothing, one with a new incarnation
// (it restarted) drops every proxy of the old one and frees their keys.
func TestOriginIndexFollowsProxies(t *testing.T) {
	a, b := servePair(t, false)
	nodes := []string{b.Addr()}
	var hs []*Holder
	for i := range 3 {
		h := testHolder(t, a)
		if err := h.LockOn(context.Background(), nodes, Exclusive, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if got := indexed(t, b, a.Addr(), a.Incarnation()); got != 3 {
		t.Fatalf("%d proxies of a indexed on b, want 3", got)
	}
	if got := b.origins(); !slices.Equal(got, []string{a.Addr()}) {
		t.Fatalf("origins on b: %v, want [%s]", got, a.Addr())
	}
	hs[0].Close()
	eventually(t, "the closed holder's proxy forgotten", func() bool { return indexed(t, b, a.Addr(), a.Incarnation()) == 2 })
	b.dropOrigin(a.Addr(), a.Incarnation())
	if got := b.Stats().LostHolders; got != 0 || indexed(t, b, a.Addr(), a.Incarnation()) != 2 {
		t.Fatalf("a tick with a's own incarnation dropped %d holders", got)
	}
	b.dropOrigin(a.Addr(), a.Incarnation()+2)
	if got := b.Stats().LostHolders; got != 2 {
		t.Fatalf("a restarted: %d holders dropped on b, want 2", got)
	}
	if got := indexed(t, b, a.Addr(), a.Incarnation()); got != 0 || len(b.origins()) != 0 {
		t.Fatalf("after the drop: %d proxies indexed, origins %v; want none", got, b.origins())
	}
	for i := range 3 {
		if k := fmt.Sprint("k", i); !freeOn(b, k) {
			t.Fatalf("%s on b after its holder's node restarted: %s", k, dump(b, k))
		}
	}
}
