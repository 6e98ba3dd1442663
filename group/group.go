package group

import (
	"errors"
	"slices"
	"sync"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/internal/follow"
	"github.com/rpcxbatch/rpcxbatch/selector"
)

// Group is a set of nodes the group calls (CallOne, CallAny, CallAll,
// CallAllWait, CastOne, CastAll) apply one call to: a Caller for the remote
// nodes, a node list (fixed, or followed from an rpcx ServiceDiscovery)
// and an optional local node served in-process. A Group is safe for
// concurrent use.
type Group struct {
	caller Caller
	local  *local // nil: no local node

	mu    sync.RWMutex
	nodes []string

	disc     client.ServiceDiscovery
	watch    chan []*client.KVPair
	stop     chan struct{}
	done     chan struct{}
	closeOne sync.Once
}

// Option configures a Group.
type Option func(*groupConfig) error

type groupConfig struct {
	nodes     []string
	disc      client.ServiceDiscovery
	localAddr string
	localSvcs map[string]any
}

// WithNodes sets a fixed node list: addresses "host:port", or rpcx's
// "network@host:port" ("tcp@" is dropped). An address may appear more than
// once; every entry is called.
func WithNodes(addrs ...string) Option {
	return func(c *groupConfig) error {
		c.nodes = slices.Clone(addrs)
		return nil
	}
}

// WithDiscovery takes the node list from an rpcx ServiceDiscovery: every
// server GetServices lists, kept up to date from WatchService until Close.
// Keys "tcp@host:port" become "host:port", the form *batchclient.Client
// takes. It replaces WithNodes.
func WithDiscovery(d client.ServiceDiscovery) Option {
	return func(c *groupConfig) error {
		if d == nil {
			return errors.New("group: WithDiscovery: the discovery is nil")
		}
		c.disc = d
		return nil
	}
}

// WithLocal declares the local node: calls to addr, wherever it appears in
// a node list, run in-process on services (service name → the receiver
// you register with the rpcx server, as in s.RegisterName(name, rcvr, ""))
// without touching the network. The policies prefer it as ecall prefers
// node(). Methods of the rpcx form func(ctx, *Args, *Reply) error are
// called; a returned error rejects, a panic is a rejection carrying the
// panic value (*PanicError). Arguments and replies of the method's own
// types are passed by reference, others are copied through msgpack.
func WithLocal(addr string, services map[string]any) Option {
	return func(c *groupConfig) error {
		if addr == "" {
			return errors.New("group: WithLocal: the local address is empty; pass the address the local server listens on")
		}
		c.localAddr, c.localSvcs = addr, services
		return nil
	}
}

// New returns a Group that reaches remote nodes through caller (a
// *batchclient.Client, a *PlainCaller, or your own Caller). The Group does
// not own caller: close it yourself after Close.
func New(caller Caller, opts ...Option) (*Group, error) {
	if caller == nil {
		return nil, errors.New("group: New: the caller is nil; pass a *batchclient.Client or a *group.PlainCaller")
	}
	var cfg groupConfig
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	g := &Group{caller: caller, nodes: normalize(cfg.nodes)}
	if cfg.localAddr != "" {
		l, err := newLocal(selector.Strip(cfg.localAddr), cfg.localSvcs)
		if err != nil {
			return nil, err
		}
		g.local = l
	}
	if cfg.disc != nil {
		g.follow(cfg.disc)
	}
	return g, nil
}

// Nodes returns a copy of the current node list.
func (g *Group) Nodes() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Clone(g.nodes)
}

// SetNodes replaces the node list (a discovery's next change replaces it
// again).
func (g *Group) SetNodes(addrs ...string) {
	n := normalize(addrs)
	g.mu.Lock()
	g.nodes = n
	g.mu.Unlock()
}

// Local returns the local node's address, or "" when there is none.
func (g *Group) Local() string {
	if g.local == nil {
		return ""
	}
	return g.local.addr
}

// isLocal reports whether node is the local node.
func (g *Group) isLocal(node string) bool {
	return g.local != nil && selector.SameNode(node, g.local.addr)
}

// Close stops following the discovery, if any. It does not close the
// Caller. Calls still work afterwards, on the last node list.
func (g *Group) Close() error {
	g.closeOne.Do(func() {
		if g.stop != nil {
			close(g.stop)
			<-g.done
			g.disc.RemoveWatcher(g.watch)
		}
	})
	return nil
}

// follow loads the discovery's servers and starts following its changes.
func (g *Group) follow(d client.ServiceDiscovery) {
	g.disc = d
	g.setPairs(d.GetServices())
	ch := d.WatchService()
	if ch == nil {
		return
	}
	g.watch, g.stop, g.done = ch, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(g.done)
		follow.Follow(ch, d.GetServices, g.setPairs, g.stop)
	}()
}

func (g *Group) setPairs(pairs []*client.KVPair) {
	addrs := make([]string, 0, len(pairs))
	for _, p := range pairs {
		addrs = append(addrs, p.Key)
	}
	slices.Sort(addrs)
	g.SetNodes(addrs...)
}

// normalize drops the "tcp@" prefix of every address.
func normalize(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = selector.Strip(a)
	}
	return out
}
