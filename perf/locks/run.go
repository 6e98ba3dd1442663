package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/etcdtest"
)

// point is one measurement: a design on an engine at a client count.
type point struct {
	Design  int
	Engine  string
	Clients int // per node
	Txns    int // per client
}

// Result is one run of one point, both nodes summed: one JSON object.
type Result struct {
	Time           string    `json:"time"`
	Design         int       `json:"design"`
	Engine         string    `json:"engine"`
	ClientsPerNode int       `json:"clients_per_node"`
	Nodes          int       `json:"nodes"`
	TxnsPerClient  int       `json:"txns_per_client"`
	LocksPerTxn    int       `json:"locks_per_txn"`
	Run            int       `json:"run"`
	Locks          int64     `json:"locks"`
	Txns           int64     `json:"txns"`
	ElapsedS       float64   `json:"elapsed_s"`
	LocksPerS      float64   `json:"locks_per_s"`
	Retries        int64     `json:"deadlock_retries"`
	RestartedTxns  int64     `json:"restarted_txns"`
	RestartShare   float64   `json:"restart_share"`
	Errors         int64     `json:"errors"`
	FirstError     string    `json:"first_error,omitempty"`
	Bounded        bool      `json:"bounded"`
	LostHolders    int64     `json:"lost_holders"`
	NodeCPUs       []float64 `json:"node_cpu_s"`
	NodeRSSMB      []float64 `json:"node_peak_rss_mb"`
	NodeMallocs    []uint64  `json:"node_mallocs"`
	NodeAllocBytes []uint64  `json:"node_alloc_bytes"`
	NodeGCs        []uint32  `json:"node_gcs"`
	// Messages sums the nodes' calls to each other by method.
	Messages map[string]int64 `json:"messages,omitempty"`
	LoadAvg  string           `json:"loadavg_at_start"`
	Cores    int              `json:"cores"`
	// Note says what a row is when its engine is not a competitor (the
	// in-process bound).
	Note string `json:"note,omitempty"`
}

func (c Config) points() []point {
	var ps []point
	for _, d := range c.Designs {
		switch d {
		case 1:
			ps = append(ps, point{1, engineBatch, c.Clients, c.Txns1})
			if !c.NoPlain {
				ps = append(ps, point{1, enginePlain, c.Clients, c.Txns1})
			}
			for _, n := range c.EtcdClients {
				ps = append(ps, point{1, engineEtcd, n, max(1, (c.EtcdLocks+2*n-1)/(2*n))})
			}
			if !c.NoInproc {
				ps = append(ps, point{1, engineInproc, c.Clients, c.Txns1})
			}
		case 3:
			ps = append(ps, point{3, engineBatch, c.Clients, c.Txns3})
			if !c.NoPlain {
				ps = append(ps, point{3, enginePlain, c.Clients, c.Txns3})
			}
		case 4:
			ps = append(ps, point{4, engineLocal, c.Clients, c.Txns4})
		}
	}
	return ps
}

// run runs every point Repeat times, engines interleaved, and writes the
// results and the report.
func run(ctx context.Context, cfg Config) error {
	if cfg.From != "" {
		return redraw(cfg)
	}
	ps := cfg.points()
	var etcd *etcdtest.Etcd
	for _, p := range ps {
		if p.Engine == engineEtcd && etcd == nil {
			var err error
			if etcd, err = etcdtest.Start(ctx); err != nil {
				return fmt.Errorf("etcd for design 1 (-etcd-clients \"\" leaves it out): %w", err)
			}
			defer etcd.Stop()
		}
	}
	var out *os.File
	if cfg.Out != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err != nil {
			return fmt.Errorf("results folder: %w", err)
		}
		f, err := os.Create(cfg.Out)
		if err != nil {
			return fmt.Errorf("results file: %w", err)
		}
		defer f.Close()
		out = f
	}
	start := time.Now()
	fmt.Printf("%-6s %-10s %7s | %11s %9s %8s %7s %7s | %s\n", "design", "engine", "clients", "locks/s", "locks", "elapsed", "retries", "restart", "notes")
	var results []Result
	for r := range cfg.Repeat {
		for _, p := range ps {
			res, err := runOne(ctx, cfg, p, r, etcd)
			if err != nil {
				return fmt.Errorf("design %d on %s, %d clients per node: %w", p.Design, p.Engine, p.Clients, err)
			}
			printRow(res)
			results = append(results, res)
			if out != nil {
				b, _ := json.Marshal(res)
				if _, err := out.Write(append(b, '\n')); err != nil {
					return fmt.Errorf("results file: %w", err)
				}
			}
		}
	}
	if cfg.Report == "" {
		return nil
	}
	return writeReport(cfg, results, time.Since(start))
}

// runOne starts two fresh node processes (one holding both nodes, for
// the in-process engine), runs p on both at once and stops them.
func runOne(ctx context.Context, cfg Config, p point, run int, etcd *etcdtest.Etcd) (Result, error) {
	transport, procs := engineBatch, 2
	switch p.Engine {
	case enginePlain:
		transport = enginePlain
	case engineInproc:
		transport, procs = engineInproc, 1
	}
	var nodes []*nodeProc
	defer func() {
		for _, np := range nodes {
			np.stop()
		}
	}()
	for range procs {
		np, err := startNode(ctx, transport, cfg.NodeTimeout)
		if err != nil {
			return Result{}, err
		}
		nodes = append(nodes, np)
	}
	var addrs []string // the pair names its own nodes
	if procs == 2 {
		addrs = []string{nodes[0].addr, nodes[1].addr}
	}
	seed := uint64(time.Now().UnixNano())
	for i, np := range nodes {
		sp := Spec{Design: p.Design, Engine: p.Engine, Clients: p.Clients, Txns: p.Txns, Pool: cfg.Pool,
			Nodes: addrs, TimeoutS: cfg.PointTimeout.Seconds(), Seed: seed, NodeID: i}
		if etcd != nil {
			sp.Etcd = etcd.Endpoint
		}
		b, _ := json.Marshal(sp)
		if err := np.send("RUN " + string(b)); err != nil {
			return Result{}, err
		}
	}
	for _, np := range nodes {
		if _, err := np.expect(ctx, "READY", 5*time.Minute); err != nil {
			return Result{}, err
		}
	}
	res := Result{Time: time.Now().UTC().Format(time.RFC3339), Design: p.Design, Engine: p.Engine,
		ClientsPerNode: p.Clients, Nodes: 2, TxnsPerClient: p.Txns, LocksPerTxn: locksPerTxn(p.Design),
		Run: run, LoadAvg: loadAvg(), Cores: runtime.NumCPU()}
	if p.Engine == engineInproc {
		res.Note = inprocNote
	}
	for _, np := range nodes {
		if err := np.send("GO"); err != nil {
			return Result{}, err
		}
	}
	for _, np := range nodes {
		line, err := np.expect(ctx, "RESULT ", cfg.PointTimeout+2*time.Minute)
		if err != nil {
			return Result{}, err
		}
		var nr NodeResult
		if err := json.Unmarshal([]byte(line), &nr); err != nil {
			return Result{}, fmt.Errorf("node %s result: %w", np.addr, err)
		}
		res.Locks += nr.Locks
		res.Txns += nr.Txns
		res.Retries += nr.Retries
		res.RestartedTxns += nr.RestartedTxns
		res.Errors += nr.Errors
		if res.FirstError == "" {
			res.FirstError = nr.FirstError
		}
		res.Bounded = res.Bounded || nr.Bounded
		res.LostHolders += nr.LostHolders
		res.ElapsedS = max(res.ElapsedS, nr.ElapsedS)
		res.NodeCPUs = append(res.NodeCPUs, nr.CPUs)
		res.NodeRSSMB = append(res.NodeRSSMB, nr.PeakRSSMB)
		res.NodeMallocs = append(res.NodeMallocs, nr.Mallocs)
		res.NodeAllocBytes = append(res.NodeAllocBytes, nr.AllocBytes)
		res.NodeGCs = append(res.NodeGCs, nr.GCs)
		for m, c := range nr.Messages {
			if c == 0 {
				continue
			}
			if res.Messages == nil {
				res.Messages = make(map[string]int64)
			}
			res.Messages[m] += c
		}
	}
	if res.ElapsedS > 0 {
		res.LocksPerS = float64(res.Locks) / res.ElapsedS
	}
	if res.Txns > 0 {
		res.RestartShare = float64(res.RestartedTxns) / float64(res.Txns)
	}
	return res, nil
}

func locksPerTxn(design int) int {
	if design == 1 {
		return 1
	}
	return 10
}

// loadAvg is /proc/loadavg's first three fields: how busy the machine was
// when a point started (other work on it shows here).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func printRow(r Result) {
	var notes []string
	if r.Bounded {
		notes = append(notes, "bounded")
	}
	if r.Errors > 0 {
		notes = append(notes, fmt.Sprintf("%d errors (%s)", r.Errors, r.FirstError))
	}
	if r.LostHolders > 0 {
		notes = append(notes, fmt.Sprintf("%d holders dropped as lost", r.LostHolders))
	}
	notes = append(notes, "load "+r.LoadAvg)
	fmt.Printf("%-6d %-10s %7d | %11.0f %9d %7.2fs %7d %6.2f%% | %s\n", r.Design, r.Engine, r.ClientsPerNode,
		r.LocksPerS, r.Locks, r.ElapsedS, r.Retries, 100*r.RestartShare, strings.Join(notes, "; "))
}

// redraw writes the report from a results file of an earlier run.
func redraw(cfg Config) error {
	b, err := os.ReadFile(cfg.From)
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	var results []Result
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("-from %s: %w", cfg.From, err)
		}
		results = append(results, r)
		cfg.Repeat = max(cfg.Repeat, r.Run+1)
	}
	if cfg.Report == "" {
		return errors.New("-from needs a -report folder")
	}
	return writeReport(cfg, results, 0)
}
