package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/lock"
)

// The node role: one lock node (an rpcx server with the batch plugin, the
// lock service on it, and a transport to the other node) and its client
// goroutines, in a process of its own. It talks to the harness over
// stdin/stdout, one line each way:
//
//	node → harness  ADDR <host:port>         at start
//	harness → node  RUN <Spec as JSON>       prepare the clients of a point
//	node → harness  READY                    clients made, waiting
//	harness → node  GO                       start them
//	node → harness  RESULT <NodeResult>      the point is over
//	node → harness  ERR <message>            the point could not run
//
// EOF on stdin ends the process.

// Spec is one point as one node runs it.
type Spec struct {
	Design   int      // 1, 3 or 4
	Engine   string   // engineBatch, enginePlain, engineLocal or engineEtcd
	Clients  int      // client goroutines on this node
	Txns     int      // transactions per client
	Pool     int      // keys are drawn from obj0 … obj<Pool-1>
	Nodes    []string // both nodes' addresses (designs 1 and 3)
	Etcd     string   // etcd endpoint (engine etcd)
	TimeoutS float64  // the point's time bound
	Seed     uint64
	NodeID   int
}

// NodeResult is what one node did during a point.
type NodeResult struct {
	Locks         int64   `json:"locks"`
	Txns          int64   `json:"txns"`
	Retries       int64   `json:"deadlock_retries"`
	RestartedTxns int64   `json:"restarted_txns"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	ElapsedS      float64 `json:"elapsed_s"`
	CPUs          float64 `json:"cpu_s"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Bounded       bool    `json:"bounded"`
	// LostHolders counts the other node's holders this node dropped
	// because it declared that node lost (missed pings): under overload,
	// a sign the point measured the timeouts, not the locks.
	LostHolders int64 `json:"lost_holders"`
	// Mallocs and GCs are the heap allocations and garbage collections
	// the node made during the point; AllocBytes is the bytes those
	// allocations took, which sets how often the collector runs.
	Mallocs    uint64 `json:"mallocs"`
	AllocBytes uint64 `json:"alloc_bytes"`
	GCs        uint32 `json:"gcs"`
	// Messages counts the calls the node made to the other node during
	// the point, by lock service method (one-way messages included).
	Messages map[string]int64 `json:"messages"`
}

// runNode is the node role's main; its stdin and stdout are the harness's
// pipes.
func runNode(in io.Reader, out io.Writer, transport string, nodeTimeout time.Duration) error {
	if transport == engineInproc {
		return runPair(in, out, nodeTimeout)
	}
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve("tcp", addr) }()
	defer s.Close()
	if err := waitServing(s, errc); err != nil {
		return err
	}
	tr := &countingTransport{}
	if transport == enginePlain {
		tr.inner = lock.NewPlainTransport(client.DefaultOption)
	} else if tr.inner, err = batchclient.New(batchclient.WithHeartbeat(batchclient.DefaultHeartbeatInterval, nodeTimeout)); err != nil {
		// The heartbeat timeout is the node timeout, as package lock
		// advises: a lane given up on fails every lock request on it.
		return err
	}
	defer tr.Close()
	var nodeTr lock.Transport = tr.inner
	if os.Getenv(countEnv) != "" {
		// Counting costs a frame and a shared counter per call: only
		// when asked for.
		nodeTr = tr
	}
	n, err := lock.New(lock.Config{Server: s, Addr: addr, Transport: nodeTr, NodeTimeout: nodeTimeout})
	if err != nil {
		return err
	}
	defer n.Close()
	fmt.Fprintf(out, "ADDR %s\n", addr)
	return serveHarness(in, out, []*lock.Node{n}, tr)
}

// serveHarness runs the points the harness sends on nodes (one, or both
// of the in-process engine) until stdin ends.
func serveHarness(in io.Reader, out io.Writer, nodes []*lock.Node, tr *countingTransport) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		spec, ok := strings.CutPrefix(line, "RUN ")
		if !ok {
			fmt.Fprintf(out, "ERR unexpected %q\n", line)
			continue
		}
		var sp Spec
		if err := json.Unmarshal([]byte(spec), &sp); err != nil {
			fmt.Fprintf(out, "ERR bad spec: %v\n", err)
			continue
		}
		res, err := runPoint(nodes, tr, sp, func() error {
			fmt.Fprintln(out, "READY")
			if !sc.Scan() {
				return errors.New("harness gone before GO")
			}
			if sc.Text() != "GO" {
				return fmt.Errorf("want GO, got %q", sc.Text())
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(out, "ERR %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		b, _ := json.Marshal(res)
		fmt.Fprintf(out, "RESULT %s\n", b)
	}
	return sc.Err()
}

func waitServing(s *server.Server, errc chan error) error {
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		select {
		case err := <-errc:
			return fmt.Errorf("serve: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("server not listening after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// runPoint makes the point's clients, calls ready (which returns at GO),
// runs them and reports. With two nodes in the process (the in-process
// engine), each gets the clients a node process would have, and the
// result is both nodes'.
func runPoint(nodes []*lock.Node, tr *countingTransport, sp Spec, ready func() error) (NodeResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cl clients
	var err error
	switch {
	case sp.Engine == engineEtcd:
		cl, err = newEtcdClients(ctx, sp)
	case len(nodes) == 1:
		cl, err = newLockClients(ctx, nodes[0], sp)
	default:
		cl, err = newPairClients(ctx, nodes, sp)
	}
	if err != nil {
		return NodeResult{}, err
	}
	defer cl.close()
	if err := ready(); err != nil {
		return NodeResult{}, err
	}
	stopProfile, err := startProfile(sp)
	if err != nil {
		return NodeResult{}, err
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	sent0 := tr.snapshot()
	before := readUsage()
	start := time.Now()
	deadline := start.Add(time.Duration(sp.TimeoutS * float64(time.Second)))
	tally := cl.run(deadline)
	stopProfile()
	res := tally.result()
	res.ElapsedS = time.Since(start).Seconds()
	res.CPUs = (readUsage() - before).Seconds()
	runtime.ReadMemStats(&ms1)
	res.Mallocs = ms1.Mallocs - ms0.Mallocs
	res.AllocBytes = ms1.TotalAlloc - ms0.TotalAlloc
	res.GCs = ms1.NumGC - ms0.NumGC
	res.Messages = tr.snapshot()
	for m, c := range sent0 {
		res.Messages[m] -= c
	}
	res.PeakRSSMB = float64(peakRSS()) / (1 << 20)
	for _, n := range nodes {
		res.LostHolders += n.Stats().LostHolders
	}
	return res, nil
}

// clients are a point's client goroutines on one node, made and waiting.
type clients interface {
	// run starts them, waits until each finished its transactions or the
	// deadline passed, and returns what they did.
	run(deadline time.Time) *tally
	close()
}

// readUsage is the process's CPU time so far, user + system.
func readUsage() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's peak resident set (VmHWM), in bytes; 0 when
// unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
