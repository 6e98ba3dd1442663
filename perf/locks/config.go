package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is one invocation of the harness.
type Config struct {
	Preset string
	// Designs to run, in order (1, 3, 4).
	Designs []int
	// Clients per node for the lock engines.
	Clients int
	// Txns per client, per design.
	Txns1, Txns3, Txns4 int
	// EtcdClients are the client counts per node etcd runs design 1 at
	// (none: etcd is left out); EtcdLocks the locks an etcd point aims at
	// (both nodes), split over its clients.
	EtcdClients []int
	EtcdLocks   int
	// Pool is the number of keys designs 1 and 3 draw from.
	Pool int
	// NoPlain leaves the plain rpcx side out.
	NoPlain bool
	// NoInproc leaves the in-process bound (design 1) out.
	NoInproc bool
	// Repeat runs every point this many times (engines interleaved); the
	// report shows the median.
	Repeat int
	// PointTimeout bounds one point: clients stop starting transactions.
	PointTimeout time.Duration
	// NodeTimeout is the lock nodes' Config.NodeTimeout.
	NodeTimeout time.Duration
	// Out is the JSON results file, Report the report folder ("" = none).
	Out, Report string
	// From, when set, is a results file to redraw the report from; no
	// point is run.
	From string
}

func parseConfig(args []string) (Config, error) {
	fs := flag.NewFlagSet("locks", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var c Config
	designs, etcd := "1,3,4", "100,1000"
	fs.StringVar(&c.Preset, "preset", "full", "defaults: full (10,000 clients per node) or quick (1,000, shorter; what CI could afford)")
	fs.StringVar(&designs, "designs", designs, "elock designs to run, comma-separated (1, 3, 4)")
	fs.IntVar(&c.Clients, "clients", 10000, "client goroutines per node (lock engines)")
	// Designs 1 and 3 take 2,000,000 locks a point, a tenth of elock's
	// 20,000,000: long enough that a holder's first contact with the
	// other node (its proxy and state made there, its goroutine's stack
	// grown: 15–30 µs a holder on either transport) is a small part
	// of a lock's cost, as in elock's runs, not a tenth of the locks.
	fs.IntVar(&c.Txns1, "txns1", 100, "design 1: transactions (one two-node lock each) per client")
	fs.IntVar(&c.Txns3, "txns3", 10, "design 3: transactions (ten two-node locks each) per client")
	fs.IntVar(&c.Txns4, "txns4", 100, "design 4: transactions (ten shared local locks each) per client")
	fs.StringVar(&etcd, "etcd-clients", etcd, "design 1 over etcd: client counts per node, comma-separated (\"\" = leave etcd out)")
	fs.IntVar(&c.EtcdLocks, "etcd-locks", 20000, "design 1 over etcd: locks per point, split over its clients")
	fs.IntVar(&c.Pool, "pool", 5_000_000, "designs 1 and 3: keys are drawn from a pool this big")
	fs.BoolVar(&c.NoPlain, "no-plain", false, "leave the plain rpcx side out")
	fs.BoolVar(&c.NoInproc, "no-inproc", false, "leave out design 1's in-process bound (both nodes in one process, no transport)")
	fs.IntVar(&c.Repeat, "repeat", 1, "runs per point (engines interleaved); the report shows the median")
	fs.DurationVar(&c.PointTimeout, "point-timeout", 120*time.Second, "time bound of one point")
	fs.DurationVar(&c.NodeTimeout, "node-timeout", 10*time.Second, "the lock nodes' NodeTimeout (ping misses before a node is declared lost)")
	fs.StringVar(&c.Out, "out", "", "JSON results file (default perf/results/locks-<preset>.json)")
	fs.StringVar(&c.Report, "report", "", "report folder (default perf/results/locks-<preset>)")
	fs.StringVar(&c.From, "from", "", "redraw the report from this results file instead of running")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch c.Preset {
	case "full":
	case "quick":
		defaults := map[string]func(){
			"clients":       func() { c.Clients = 1000 },
			"txns1":         func() { c.Txns1 = 5 },
			"txns3":         func() { c.Txns3 = 2 },
			"txns4":         func() { c.Txns4 = 200 },
			"etcd-clients":  func() { etcd = "100" },
			"etcd-locks":    func() { c.EtcdLocks = 2000 },
			"point-timeout": func() { c.PointTimeout = 20 * time.Second },
		}
		for name, f := range defaults {
			if !set[name] {
				f()
			}
		}
	default:
		return c, fmt.Errorf("-preset %q: want full or quick", c.Preset)
	}
	if c.Out == "" && !set["out"] {
		c.Out = "perf/results/locks-" + c.Preset + ".json"
	}
	if c.Report == "" && !set["report"] {
		c.Report = "perf/results/locks-" + c.Preset
	}
	var err error
	if c.Designs, err = ints(designs); err != nil {
		return c, fmt.Errorf("-designs: %w", err)
	}
	for _, d := range c.Designs {
		if d != 1 && d != 3 && d != 4 {
			return c, fmt.Errorf("-designs: no design %d (1, 3 or 4)", d)
		}
	}
	if c.EtcdClients, err = ints(etcd); err != nil {
		return c, fmt.Errorf("-etcd-clients: %w", err)
	}
	if c.Clients <= 0 || c.Pool <= 0 || c.Repeat <= 0 {
		return c, fmt.Errorf("-clients, -pool and -repeat must be positive")
	}
	return c, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
