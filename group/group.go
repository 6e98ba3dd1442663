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
//
// Every operation is done with its arguments (and the rpcx request
// metadata in ctx) when it returns: the nodes get a copy, encoded with the
// Caller's codec (its SerializeType, else msgpack) and decoded into args's
// type on the caller's goroutine (ErrEncode when that fails, before any
// node runs anything); the local node tried first by CallOne and CallAny
// gets args and ctx themselves, after that copy is taken (docs/group.md).
// Close ends the contexts of the goroutines a Group starts and waits for
// them; casts in flight are bounded (WithMaxCastsInFlight).
type Group struct {
	caller Caller
	local  *local // nil: no local node

	mu    sync.RWMutex // guards nodes (replaced whole as discovery changes)
	nodes []string

	disc     client.ServiceDiscovery
	watch    chan []*client.KVPair
	stop     chan struct{}
	done     chan struct{}
	closeOne sync.Once

	owned // the goroutines of casts and fan-outs, which Close ends and waits for

	// castSlots holds a token per cast in flight (see WithMaxCastsInFlight).
	castSlots chan struct{}
}

// Option configures a Group.
type Option func(*groupConfig) error

type groupConfig struct {
	nodes     []string
	disc      client.ServiceDiscovery
	localAddr string
	localSvcs map[string]any
	maxCasts  int
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
// panic value (*PanicError). A call that runs on the caller's goroutine
// (the local node tried first by CallOne and CallAny) gets the caller's
// arguments by reference when they are of the method's own type; one
// that may outlive the operation (casts, CallAll, CallAllWait) gets a copy
// of its own (see Group). Replies of the method's own type are passed by
// reference; other types are converted with the Caller's codec (as for
// the arguments), as the wire would.
func WithLocal(addr string, services map[string]any) Option {
	return func(c *groupConfig) error {
		if addr == "" {
			return errors.New("group: WithLocal: empty local address")
		}
		c.localAddr, c.localSvcs = addr, services
		return nil
	}
}

// New returns a Group that reaches remote nodes through caller (a
// *batchclient.Client, a *PlainCaller, or your own Caller). The Group does
// not own caller: close it yourself after Close. It fails for a nil
// caller and for an option value it cannot use (a nil discovery, an
// empty local address, a local service without rpcx methods, a cast
// bound below 1).
func New(caller Caller, opts ...Option) (*Group, error) {
	if caller == nil {
		return nil, errors.New("group: New: nil Caller")
	}
	var cfg groupConfig
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.maxCasts == 0 {
		cfg.maxCasts = DefaultMaxCastsInFlight
	}
	g := &Group{caller: caller, nodes: normalize(cfg.nodes), castSlots: make(chan struct{}, cfg.maxCasts)}
	g.owned.init()
	if cfg.localAddr != "" {
		l, err := newLocal(selector.Strip(cfg.localAddr), serializeTypeOf(caller), cfg.localSvcs)
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

// Close stops following the discovery, if any, ends the group's calls
// still running on goroutines of its own (casts not yet queued or still
// running on the local node, and per-node calls a policy left running
// when it returned) by ending their contexts, and waits for those
// goroutines to return: a local handler, or a Caller's Cast or Call, that
// ignores its context holds Close up. Per-node calls started with the Caller's Go run no goroutine
// of the group; they end with the caller's context or the Caller. Close
// does not close the Caller. Operations after Close fail with ErrClosed.
// Close is idempotent.
func (g *Group) Close() error {
	g.closeOne.Do(func() {
		g.owned.close()
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
