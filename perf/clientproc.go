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

// The client processes: every path's points run in a client process of
// the path's own, as every path has a server process of its own. In one
// process shared by all paths, each path ran on a heap, goroutine stacks
// and collector pacing the paths before it had left (the plain paths'
// cast points left some 180 MB of RSS behind), and a path's figures then
// depended on which paths ran before it in the same process.
//
// The harness re-executes its own binary with roleEnv set to roleClient
// and a clientSpec (JSON) in clientEnv; the process dials its path's
// server and control service, then reads one clientRequest a line on
// stdin, runs it (runPath) and answers one clientReply a line on stdout,
// until stdin closes.
const (
	roleClient = "client"
	clientEnv  = "RPCXBATCH_PERF_CLIENT"
)

// clientSpec is what a client process is told at its start: the run's
// Config, its path, and its server's service and control addresses.
type clientSpec struct {
	Config           Config
	Path, Addr, Ctrl string
}

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
		Lat: m.lat, Client: m.client, ClientRSS: m.clientRSS, ClientG: m.clientG, Server: m.server, Lanes: m.lanes, Pid: m.clientPid}
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
		lat: r.Lat, client: r.Client, clientRSS: r.ClientRSS, clientG: r.ClientG, server: r.Server, lanes: r.Lanes, clientPid: r.Pid}
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
	b, err := json.Marshal(clientSpec{Config: cfg, Path: path, Addr: env.srv.addr, Ctrl: env.srv.ctrl})
	if err != nil {
		return nil, fmt.Errorf("%s path's client process: %w", path, err)
	}
	ch, err := benchkit.StartChild("client", nil, []string{roleEnv + "=" + roleClient, clientEnv + "=" + string(b)}, stderr)
	if err != nil {
		return nil, fmt.Errorf("%s path's client process: %w", path, err)
	}
	cp := &clientProc{childProc: &childProc{ch}, enc: json.NewEncoder(ch.Stdin),
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
			<-cp.Exited()
			return measurement{}, fmt.Errorf("client process exited: %v", cp.WaitErr())
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
// for over its path, one at a time, until stdin closes; with -cpuprofile,
// under a CPU profile of its own.
func runClient(ctx context.Context) error {
	log.SetLogger(quietLogger{log.GetLogger()})
	var spec clientSpec
	if err := json.Unmarshal([]byte(os.Getenv(clientEnv)), &spec); err != nil {
		return fmt.Errorf("%s: %w", clientEnv, err)
	}
	return profiled(profileFile(spec.Config.CPUProfile, "client-"+spec.Path), func() error {
		ctl, err := dialControl(spec.Ctrl)
		if err != nil {
			return err
		}
		defer ctl.close()
		env := &runEnv{cfg: spec.Config, srv: &serverProc{addr: spec.Addr}, ctl: ctl, progress: &countingWriter{w: os.Stderr}}
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
			m, err := runPath(ctx, env, req.Point, spec.Path)
			if err := enc.Encode(replyOf(m, err)); err != nil {
				return fmt.Errorf("writing a measurement: %w", err)
			}
		}
	})
}

// startClients starts a client process for each path; what it started is
// in the result even when it fails, for the caller to stop.
func startClients(cfg Config, paths []string, envs pathEnvs, stderr io.Writer) (map[string]*clientProc, error) {
	clients := map[string]*clientProc{}
	for _, path := range paths {
		cp, err := startClientProc(cfg, path, envs[path], stderr)
		if err != nil {
			return clients, err
		}
		clients[path] = cp
	}
	return clients, nil
}
