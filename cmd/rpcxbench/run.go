package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	rlog "github.com/smallnest/rpcx/log"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// run runs cfg: the first call over each path, then every concurrency's
// rounds, the table, the JSON lines and the figure.
func run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if !cfg.Verbose {
		// rpcx logs every failed dial and closed connection; the tool
		// says what matters itself, in one line.
		rlog.SetDummyLogger()
		// The etcd client logs its retries as JSON lines on stderr; its
		// level comes from this variable, read as each client is made.
		if _, set := os.LookupEnv("ETCD_CLIENT_DEBUG"); !set {
			os.Setenv("ETCD_CLIENT_DEBUG", "fatal")
		}
	}
	args, err := argValue(cfg.Args, cfg.Serialize)
	if err != nil {
		return err
	}
	var sink *os.File
	if cfg.JSON != "" {
		if sink, err = os.Create(cfg.JSON); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		defer sink.Close()
	}
	t, err := dial(cfg)
	if err != nil {
		return err
	}
	defer t.close()
	reply, err := t.probe(ctx, args)
	if err != nil {
		return err
	}
	printHeader(stdout, cfg, t.servers(), reply)

	var rows []row
	tableHeader(stdout)
	for ci, c := range cfg.Concurrency {
		r, err := runPoint(ctx, t, args, c, ci, stderr)
		if err != nil {
			return err
		}
		r.Servers = t.servers()
		rows = append(rows, r)
		tableRow(stdout, r)
		if sink != nil {
			if err := writeJSON(sink, cfg, r); err != nil {
				return err
			}
		}
	}
	printErrors(stdout, rows)
	printFooter(stdout, cfg, t.servers())
	if cfg.JSON != "" {
		if err := sink.Close(); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		fmt.Fprintln(stderr, "JSON lines:", cfg.JSON)
	}
	if cfg.Figure != "" {
		if err := drawFigure(cfg, rows); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "figure:", cfg.Figure)
	}
	return nil
}

// row is one concurrency: each path's rounds summed.
type row struct {
	Concurrency int
	Paths       map[string]*pathResult
	// Servers is what the drop-in found on each server by the end of the
	// point.
	Servers []server
}

// pathResult is one path's runs at one concurrency, summed over rounds.
type pathResult struct {
	Calls   int64
	Errors  map[string]*errCount
	Elapsed time.Duration
	CPU     time.Duration
	// Rounds are each round's calls per second, in round order.
	Rounds []float64
	hist   *benchkit.Histogram
}

// errCount is the errors of one kind and the first one's text.
type errCount struct {
	N     int64  `json:"n"`
	First string `json:"first"`
}

func (p *pathResult) callsPerS() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Calls) / p.Elapsed.Seconds()
}

func (p *pathResult) errors() int64 {
	var n int64
	for _, e := range p.Errors {
		n += e.N
	}
	return n
}

// cpuPerCall is the client's CPU µs per call, errors included; -1 when
// no call ended.
func (p *pathResult) cpuPerCall() float64 {
	n := p.Calls + p.errors()
	if n == 0 {
		return -1
	}
	return float64(p.CPU.Microseconds()) / float64(n)
}

// quantiles are p50, p99 and p99.9 of the successful calls, in µs; nil
// when none succeeded.
func (p *pathResult) quantiles() []float64 {
	q := p.hist.Quantiles(0.5, 0.99, 0.999)
	if q == nil {
		return nil
	}
	out := make([]float64, len(q))
	for i, d := range q {
		out[i] = float64(d) / 1e3
	}
	return out
}

// runPoint runs concurrency c: a warm-up of each path, then the rounds,
// the paths' order alternating from round to round (and from one
// concurrency to the next) so that neither always runs first.
func runPoint(ctx context.Context, t *target, args any, c, ci int, stderr io.Writer) (row, error) {
	cfg := t.cfg
	r := row{Concurrency: c, Paths: map[string]*pathResult{}}
	for _, path := range paths {
		r.Paths[path] = &pathResult{Errors: map[string]*errCount{}, hist: new(benchkit.Histogram)}
		if cfg.Warmup > 0 {
			if _, err := load(ctx, t, path, args, c, cfg.Warmup, 0, nil); err != nil {
				return r, err
			}
		}
	}
	d, n := cfg.Duration/time.Duration(cfg.Rounds), 0
	if cfg.Count > 0 {
		d, n = 0, cfg.Count/cfg.Rounds
	}
	for round := range cfg.Rounds {
		order := paths
		if (round+ci)%2 == 1 {
			order = []string{paths[1], paths[0]}
		}
		for _, path := range order {
			var prog *progress
			if cfg.Progress {
				prog = &progress{w: stderr, label: fmt.Sprintf("c=%d round %d/%d %s", c, round+1, cfg.Rounds, pathLabel[path]),
					d: d, n: int64(n)}
			}
			m, err := load(ctx, t, path, args, c, d, n, prog)
			if err != nil {
				return r, err
			}
			p := r.Paths[path]
			p.Calls += m.calls
			p.Elapsed += m.elapsed
			p.CPU += m.cpu
			p.hist.Merge(m.hist)
			for k, e := range m.errs {
				if p.Errors[k] == nil {
					p.Errors[k] = &errCount{First: e.First}
				}
				p.Errors[k].N += e.N
			}
			rate := 0.0
			if m.elapsed > 0 {
				rate = float64(m.calls) / m.elapsed.Seconds()
			}
			p.Rounds = append(p.Rounds, rate)
		}
	}
	return r, nil
}

// measured is one run of one path.
type measured struct {
	calls   int64
	errs    map[string]*errCount
	elapsed time.Duration
	cpu     time.Duration
	hist    *benchkit.Histogram
}

// load runs c goroutines calling over path for d, or until n calls have
// been made (n > 0), and measures them. A goroutine that gets an error
// counts it and goes on. Only ctx's end (^C) ends it early, with ctx's
// error.
func load(ctx context.Context, t *target, path string, args any, c int, d time.Duration, n int, prog *progress) (measured, error) {
	m := measured{errs: map[string]*errCount{}, hist: new(benchkit.Histogram)}
	var (
		stop    atomic.Bool
		tickets atomic.Int64 // calls left to start, with n
		calls   atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex // guards m.errs
		start   = make(chan struct{})
	)
	tickets.Store(int64(n))
	for w := range c {
		reply := newReply(t.cfg.Serialize)
		wg.Go(func() {
			<-start
			for !stop.Load() && ctx.Err() == nil {
				if n > 0 && tickets.Add(-1) < 0 {
					return
				}
				if r, ok := reply.(*any); ok {
					// A decoder fills the value an interface holds, and
					// msgpack will not fill a map held by value: each
					// reply decodes into a fresh one.
					*r = nil
				}
				t0 := time.Now()
				err := t.call(ctx, path, args, reply)
				if err == nil {
					m.hist.Record(w, time.Since(t0))
					calls.Add(1)
					continue
				}
				if ctx.Err() != nil {
					return
				}
				kind := errKind(err)
				mu.Lock()
				e := m.errs[kind]
				if e == nil {
					e = &errCount{First: oneLine(err.Error())}
					m.errs[kind] = e
				}
				e.N++
				mu.Unlock()
			}
		})
	}
	stopProgress := prog.start(&calls)
	cpu0 := benchkit.ProcessCPU()
	t0 := time.Now()
	close(start)
	if n == 0 {
		benchkit.Sleep(ctx, d)
		stop.Store(true)
	}
	wg.Wait()
	m.elapsed = time.Since(t0)
	m.cpu = benchkit.ProcessCPU() - cpu0
	stopProgress()
	m.calls = calls.Load()
	return m, ctx.Err()
}

// errKind sorts an error into the table's kinds: timeout (the call's
// deadline), service (the service's handler answered with an error),
// connection (a connection that could not be made or was lost), shutdown
// (the client or the server shut down), no server (the selector had
// none) and other.
func errKind(err error) string {
	var se client.ServiceError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded"):
		return "timeout"
	case errors.Is(err, client.ErrXClientNoServer):
		return "no server"
	case errors.Is(err, client.ErrShutdown) || strings.Contains(err.Error(), "shut down") || strings.Contains(err.Error(), "shutdown"):
		return "shutdown"
	case errors.As(err, &se):
		return "service"
	case isUnreachable(err):
		return "connection"
	}
	return "other"
}

// progressEvery is how often progress prints a line.
var progressEvery = time.Second

// progress prints a line every progressEvery to w while a run lasts; nil
// prints nothing.
type progress struct {
	w     io.Writer
	label string
	d     time.Duration
	n     int64
}

// start begins the lines; the returned func ends them, and when it
// returns the goroutine is gone.
func (p *progress) start(calls *atomic.Int64) (stop func()) {
	if p == nil {
		return func() {}
	}
	t0 := time.Now()
	return benchkit.Every(progressEvery, func() {
		of := ""
		switch {
		case p.n > 0:
			of = fmt.Sprintf(" of %s", benchkit.Thousands(float64(p.n)))
		case p.d > 0:
			of = fmt.Sprintf(" (%v of %v)", time.Since(t0).Round(100*time.Millisecond), p.d)
		}
		fmt.Fprintf(p.w, "  %s: %s calls%s\n", p.label, benchkit.Thousands(float64(calls.Load())), of)
	})
}
