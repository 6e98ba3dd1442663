package selector

import (
	"math/rand/v2"
	"slices"
	"strings"
)

// Strip returns addr without an rpcx "tcp@" network prefix: "tcp@host:port"
// becomes "host:port". Addresses of other networks keep their prefix.
func Strip(addr string) string {
	if rest, ok := strings.CutPrefix(addr, "tcp@"); ok {
		return rest
	}
	return addr
}

// SameNode reports whether a and b name the same server: the same
// host:port, whatever rpcx network prefix either has ("tcp@", or the
// per-XClient network names the drop-in XClient of batchclient gives its
// servers).
func SameNode(a, b string) bool { return hostPort(a) == hostPort(b) }

func hostPort(addr string) string {
	if i := strings.IndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// Order returns a copy of nodes in ecall's order: every entry naming local
// first (in list order), then the others in random order. An empty local
// means no local node: the whole list is shuffled.
func Order(nodes []string, local string) []string {
	out := make([]string, 0, len(nodes))
	var rest []string
	for _, n := range nodes {
		if local != "" && SameNode(n, local) {
			out = append(out, n)
		} else {
			rest = append(rest, n)
		}
	}
	rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return append(out, rest...)
}

// keys returns the server keys of an rpcx server map, sorted so that a
// selector's choices depend only on its random source.
func keys(servers map[string]string) []string {
	ks := make([]string, 0, len(servers))
	for k := range servers {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
