package selector

import (
	"context"
	"math/rand/v2"
	"sync"

	"github.com/smallnest/rpcx/client"
)

// RandomOrder is an rpcx client.Selector that hands out the servers in a
// random permutation: every server once before any server twice, the
// permutation redrawn each round. Successive calls are spread evenly, and in
// a context made by Track the retries of one call visit distinct servers.
type RandomOrder struct {
	mu      sync.Mutex // guards servers and perm
	servers []string
	perm    []string // what is left of the current round
}

var _ client.Selector = (*RandomOrder)(nil)

// NewRandomOrder returns an empty RandomOrder selector; rpcx fills it
// through UpdateServer when it is set on an XClient.
func NewRandomOrder() *RandomOrder { return &RandomOrder{} }

// Select returns the server for one attempt, or "" when there is none.
func (s *RandomOrder) Select(ctx context.Context, _, _ string, _ any) string {
	if t := trackerOf(ctx); t != nil {
		s.mu.Lock()
		servers := s.servers
		s.mu.Unlock()
		return t.pick(Order(servers, ""))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.servers) == 0 {
		return ""
	}
	if len(s.perm) == 0 {
		s.perm = append(s.perm[:0], s.servers...)
		rand.Shuffle(len(s.perm), func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
	}
	k := s.perm[len(s.perm)-1]
	s.perm = s.perm[:len(s.perm)-1]
	return k
}

// UpdateServer replaces the server set and starts a new round.
func (s *RandomOrder) UpdateServer(servers map[string]string) {
	ks := keys(servers)
	s.mu.Lock()
	s.servers, s.perm = ks, nil
	s.mu.Unlock()
}
