package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/smallnest/rpcx/server"
)

// ServicePath is the rpcx service name a node registers its lock service
// under.
const ServicePath = "RpcxbatchLock"

// Defaults for Config.
const (
	DefaultProbeLimit    = 1000
	DefaultProbeInterval = 200 * time.Millisecond
	DefaultNodeTimeout   = 2 * time.Second
	DefaultReleaseLinger = 2 * time.Millisecond
	// DefaultLeaseMarginDivisor makes Config.LeaseMargin's default: a
	// quarter of NodeTimeout (500 ms of the default 2 s).
	DefaultLeaseMarginDivisor = 4
)

// Transport is how a node reaches the other nodes. *batchclient.Client
// implements it; any other implementation (plain rpcx clients, for a
// side-by-side comparison) works the same way. A Transport that also has
// rpcx's asynchronous Go, as *batchclient.Client and PlainTransport do,
//
//	Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call
//
// carries the node's one-way messages (Release, Abort, Drop) with no
// goroutine per message in flight; over one without it, each message in
// flight takes a goroutine (at most 64 per node).
type Transport interface {
	Call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any) error
	Cast(ctx context.Context, addr, servicePath, serviceMethod string, args any) error
}

// Config configures a Node.
type Config struct {
	// Server is the rpcx server the lock service is registered on, so that
	// other nodes can reach this one. Nil makes a node that serves only its
	// own holders.
	Server *server.Server
	// Addr is the address other nodes reach Server at, as they name this
	// node in their requests ("host:port"). Required with Server.
	Addr string
	// Transport reaches the other nodes; required with Server and for
	// requests on other nodes. Usually a *batchclient.Client shared with
	// the application.
	Transport Transport
	// ProbeLimit is how many locks one branch of a deadlock walk may visit
	// before the request it started from fails with ErrProbeLimit.
	// Default DefaultProbeLimit.
	ProbeLimit int
	// ProbeInterval is how long a queued request whose holder holds
	// something waits before its deadlock walk is repeated (doubling, up
	// to 16 times the interval): a wait that became part of a cycle after
	// its first walk is found this way. Default DefaultProbeInterval.
	ProbeInterval time.Duration
	// NodeTimeout is how long another node may stay unreachable before
	// this node drops the locks its holders hold here; set it to the
	// transport's heartbeat timeout. Default DefaultNodeTimeout.
	NodeTimeout time.Duration
	// ReleaseLinger is how long a release of keys held on another node
	// waits before it is sent there on its own. A request of the same
	// holder to that node within that time carries the release instead
	// (AcquireArgs.Released), and the message is not sent: a holder that
	// locks and releases in a loop costs that node one message per lock,
	// not two. A holder that does not come back hands its keys over that
	// much later. Default DefaultReleaseLinger; negative: no linger.
	ReleaseLinger time.Duration
	// LeaseMargin is how much sooner than NodeTimeout a holder's lease on
	// another node runs out. A holder's locks on another node are valid,
	// on its side, for NodeTimeout - LeaseMargin from the sending of the
	// last call that node answered (a Ping every NodeTimeout/8, or a lock
	// request); the other node drops them no sooner than NodeTimeout after
	// it received that call. The margin covers the difference in clock
	// rate between the two machines (NodeTimeout times the relative rate
	// drift: a few ms on NTP-disciplined clocks), the delay of the timer
	// that closes Holder.Lost, and the time the application takes to stop
	// acting on its locks once told. Every node of a cluster must use the
	// same NodeTimeout. Default NodeTimeout/DefaultLeaseMarginDivisor;
	// New refuses a margin that leaves no lease (>= NodeTimeout).
	LeaseMargin time.Duration
}

// New starts a lock node. With cfg.Server set, its lock service is
// registered there under ServicePath; with a batch plugin on that server
// the service is reached over the batch path like any other. A Config it
// cannot run with fails with ErrConfig.
func New(cfg Config) (*Node, error) {
	if cfg.ProbeLimit <= 0 {
		cfg.ProbeLimit = DefaultProbeLimit
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	if cfg.ReleaseLinger == 0 {
		cfg.ReleaseLinger = DefaultReleaseLinger
	}
	if cfg.LeaseMargin == 0 {
		cfg.LeaseMargin = cfg.NodeTimeout / DefaultLeaseMarginDivisor
	}
	if cfg.LeaseMargin < 0 || cfg.LeaseMargin >= cfg.NodeTimeout {
		return nil, fmt.Errorf("%w: LeaseMargin %v leaves no lease within NodeTimeout %v (it must be between 0 and NodeTimeout)", ErrConfig, cfg.LeaseMargin, cfg.NodeTimeout)
	}
	if cfg.Server != nil && cfg.Addr == "" {
		return nil, fmt.Errorf("%w: Addr is required with Server: other nodes name this node by it", ErrConfig)
	}
	if cfg.Server != nil && cfg.Transport == nil {
		return nil, fmt.Errorf("%w: Transport is required with Server: the node answers other nodes' holders over it", ErrConfig)
	}
	n := &Node{
		cfg:      cfg,
		inc:      newIncarnation(),
		table:    newTable(),
		proxies:  make(map[OwnerID]*owner),
		byOrigin: originIndex{},
		peers:    make(map[string]*peer),
		holders:  make(map[OwnerID]*Holder),
		tombs:    make(map[OwnerID]tomb),
		live:     make(map[string]*originLive),
		leases:   make(map[string]*lease),
	}
	n.tokens.Store(newTokens())
	for i := range n.answers {
		n.answers[i].m = make(map[answerKey]chan verdict)
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if cfg.Server != nil {
		if err := cfg.Server.RegisterName(ServicePath, &Service{n: n}, ""); err != nil {
			n.cancel()
			return nil, fmt.Errorf("lock: registering the lock service: %w", err)
		}
	}
	if cfg.Transport != nil {
		n.wg.Add(1)
		go n.watchPeers()
	}
	return n, nil
}

func (n *Node) name() string {
	if n.cfg.Addr == "" {
		return "local node"
	}
	return n.cfg.Addr
}
