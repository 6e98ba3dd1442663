package selector

import (
	"context"
	"math/rand/v2"
	"sync"

	"github.com/smallnest/rpcx/client"
)

// LocalFirst is an rpcx client.Selector that picks the local server
// whenever it is among the XClient's servers, and a random server
// otherwise. In a context made by Track, successive selections of one call
// go to the local server first and then to each other server once, in
// random order: rpcx's Failover mode then behaves like ecall's call_one.
type LocalFirst struct {
	local string

	mu      sync.RWMutex // guards servers and localK
	servers []string     // sorted keys
	localK  string       // the key naming local, or ""
}

var _ client.Selector = (*LocalFirst)(nil)

// NewLocalFirst returns a LocalFirst selector for the server at local,
// written "host:port" or "tcp@host:port" (the form rpcx's discoveries use).
func NewLocalFirst(local string) *LocalFirst { return &LocalFirst{local: local} }

// Select returns the server for one attempt, or "" when there is none.
func (s *LocalFirst) Select(ctx context.Context, _, _ string, _ any) string {
	s.mu.RLock()
	servers, localK := s.servers, s.localK
	s.mu.RUnlock()
	if len(servers) == 0 {
		return ""
	}
	if t := trackerOf(ctx); t != nil {
		return t.pick(Order(servers, localK))
	}
	if localK != "" {
		return localK
	}
	return servers[rand.IntN(len(servers))]
}

// UpdateServer replaces the server set; rpcx calls it on discovery changes.
func (s *LocalFirst) UpdateServer(servers map[string]string) {
	ks := keys(servers)
	localK := ""
	for _, k := range ks {
		if SameNode(k, s.local) {
			localK = k
			break
		}
	}
	s.mu.Lock()
	s.servers, s.localK = ks, localK
	s.mu.Unlock()
}
