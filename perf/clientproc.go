package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/smallnest/rpcx/log"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// The client processes: by default every path's points run in a client
// process of the path's own, as every path has a server process of its
// own. In one process shared by all paths, each path ran on a heap,
// goroutine stacks and collector pacing the paths before it had left (the
// plain paths' cast points left some 180 MB of RSS behind), and a path's
// figures then depended on which paths ran before it in the same process.
//
// The harness re-executes its own binary with roleEnv set to roleClient
// and the run's Config (JSON) in clientConfigEnv; the process dials its
// path's server and control service, then reads one clientRequest a line
// on stdin, runs it (runPath, as the harness would in its own process) and
// answers one clientReply a line on stdout, until stdin closes.
const (
	roleClient      = "client"
	clientConfigEnv = "RPCXBATCH_PERF_CLIENT_CONFIG"
	clientPathEnv   = "RPCXBATCH_PERF_CLIENT_PATH"
	clientAddrEnv   = "RPCXBATCH_PERF_CLIENT_ADDR"
	clientCtrlEnv   = "RPCXBATCH_PERF_CLIENT_CTRL"
)

// clientRequest asks a client process to measure one point.
type clientRequest struct {
	Point Point
}

// clientReply is a measurement on the wire, or the error that ended it.
type clientReply struct {
	Ops, Submitted, Errs int64
	FirstErr             string
	Elapsed              time.Duration
	Bounded              bool
	Lat                  []time.Duration
	Pace                 *paceSummary
	Client               usage
	ClientRSS, ClientG   int64
	Server               ServerStats
	Lanes                int
	Pid                  int
	// Err is why the point could not be measured ("" when it was).
	Err string
}

func replyOf(m measurement, err error) clientReply {
	r := clientReply{Ops: m.ops, Submitted: m.submitted, Errs: m.errs, Elapsed: m.elapsed, Bounded: m.bounded,
		Lat: m.lat, Pace: m.pace, Client: m.client, ClientRSS: m.clientRSS, ClientG: m.clientG, Server: m.server, Lanes: m.lanes, Pid: m.clientPid}
	if m.firstErr != nil {
		r.FirstErr = m.firstErr.Error()
	}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

func (r clientReply) measurement() (measurement, error) {
	m := measurement{ops: r.Ops, submitted: r.Submitted, errs: r.Errs, elapsed: r.Elapsed, bounded: r.Bounded,
		lat: r.Lat, pace: r.Pace, client: r.Client, clientRSS: r.ClientRSS, clientG: r.ClientG, server: r.Server, lanes: r.Lanes, clientPid: r.Pid}
	if r.FirstErr != "" {
		m.firstErr = errors.New(r.FirstErr)
	}
	if r.Err != "" {
		return m, fmt.Errorf("client process: %s", r.Err)
	}
	return m, nil
}

// clientProc is a path's client process; stop ends it.
type clientProc struct {
	*childProc
	enc     *json.Encoder
	replies chan clientReply // closed when stdout does
	// quit, closed by stop, ends the reader of a reply nobody waits for
	// any more (its point timed out, or the run was cancelled).
	quit     chan struct{}
	stopOnce sync.Once
}

// startClientProc starts path's client process against env's server. Its
// stderr (progress lines, errors) goes to stderr.
func startClientProc(cfg Config, path string, env *runEnv, stderr io.Writer) (*clientProc, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s path's client process: %w", path, err)
	}
	ch, err := benchkit.StartChild("client", nil, []string{roleEnv + "=" + roleClient, clientConfigEnv + "=" + string(b),
		clientPathEnv + "=" + path, clientAddrEnv + "=" + env.srv.addr, clientCtrlEnv + "=" + env.srv.ctrl}, stderr)
	if err != nil {
		return nil, fmt.Errorf("%s path's client process: %w", path, err)
	}
	cp := &clientProc{childProc: newChildProc(ch), enc: json.NewEncoder(ch.Stdin),
		replies: make(chan clientReply), quit: make(chan struct{})}
	go func() { // ends when stdout closes, or at stop
		defer close(cp.replies)
		dec := json.NewDecoder(bufio.NewReader(ch.Stdout))
		for {
			var r clientReply
			if dec.Decode(&r) != nil {
				io.Copy(io.Discard, ch.Stdout)
				return
			}
			select {
			case cp.replies <- r:
			case <-cp.quit:
				io.Copy(io.Discard, ch.Stdout)
				return
			}
		}
	}()
	return cp, nil
}

// measure runs pt in the client process and waits for its measurement,
// bounded by the point's own timeout and a margin for the warm-up and the
// settling around it.
func (cp *clientProc) measure(ctx context.Context, pt Point, timeout time.Duration) (measurement, error) {
	if err := cp.enc.Encode(clientRequest{Point: pt}); err != nil {
		return measurement{}, fmt.Errorf("client process: %w", err)
	}
	t := time.NewTimer(timeout + time.Minute)
	defer t.Stop()
	select {
	case r, ok := <-cp.replies:
		if !ok {
			<-cp.exited
			return measurement{}, fmt.Errorf("client process exited: %v", cp.waitErr)
		}
		return r.measurement()
	case <-t.C:
		return measurement{}, fmt.Errorf("client process gave no measurement within %v", timeout+time.Minute)
	case <-ctx.Done():
		return measurement{}, ctx.Err()
	}
}

// stop ends the process (childProc.stop) and a reader still holding a
// reply. It is safe to call more than once.
func (cp *clientProc) stop() {
	cp.stopOnce.Do(func() { close(cp.quit) })
	cp.childProc.stop()
}

// runClient is the client process: it measures the points its stdin asks
// for over its path, one at a time, until stdin closes.
func runClient(ctx context.Context) error {
	log.SetLogger(quietLogger{log.GetLogger()})
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(clientConfigEnv)), &cfg); err != nil {
		return fmt.Errorf("%s: %w", clientConfigEnv, err)
	}
	path := os.Getenv(clientPathEnv)
	ctl, err := dialControl(os.Getenv(clientCtrlEnv))
	if err != nil {
		return err
	}
	defer ctl.close()
	env := &runEnv{cfg: cfg, srv: &serverProc{addr: os.Getenv(clientAddrEnv)}, ctl: ctl, progress: &countingWriter{w: os.Stderr}}
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	enc := json.NewEncoder(os.Stdout)
	for {
		var req clientRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading a request: %w", err)
		}
		m, err := runPath(ctx, env, req.Point, path)
		if err := enc.Encode(replyOf(m, err)); err != nil {
			return fmt.Errorf("writing a measurement: %w", err)
		}
	}
}

// startClients starts a client process for each path, unless
// cfg.SharedClient; what it started is in the result even when it fails,
// for the caller to stop.
func startClients(cfg Config, paths []string, envs pathEnvs, stderr io.Writer) (map[string]*clientProc, error) {
	clients := map[string]*clientProc{}
	if cfg.SharedClient {
		return clients, nil
	}
	for _, path := range paths {
		cp, err := startClientProc(cfg, path, envs[path], stderr)
		if err != nil {
			return clients, err
		}
		clients[path] = cp
	}
	return clients, nil
}

// measurePath measures pt over path: in the path's client process when it
// has one (cp), else in this process.
func measurePath(ctx context.Context, env *runEnv, cp *clientProc, pt Point, path string) (measurement, error) {
	if cp == nil {
		return runPath(ctx, env, pt, path)
	}
	return cp.measure(ctx, pt, env.cfg.PointTimeout)
}
