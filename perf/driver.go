package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// runEnv is what every run of a path shares: its server and the control
// connection to it, and where progress goes (see servers.go).
type runEnv struct {
	cfg      Config
	srv      *serverProc
	ctl      *controlClient
	progress *countingWriter // stderr, counted so its writes can be subtracted
	info     ServerInfo
}

// measurement is what one run collected, before it is turned into a Result.
type measurement struct {
	ops, submitted, errs int64
	firstErr             error
	elapsed              time.Duration
	bounded              bool
	lat                  []time.Duration // p50, p99, p99.9; nil for cast and send
	client               usage
	clientRSS, clientG   int64
	server               ServerStats
	// lanes is the batch client's lanes to the server at the end of the
	// point, the drop-in's Client's on the dropin path (0 on rpcx's).
	lanes int
	// clientPid is the process the writers ran in.
	clientPid int
}

// doneCounter counts operations done by many writers, in padded shards so
// that progress reporting costs the writers no shared cache line.
type doneCounter struct {
	shards [64]struct {
		n atomic.Int64
		_ [56]byte
	}
}

func (d *doneCounter) add(w int) { d.shards[w%len(d.shards)].n.Add(1) }

func (d *doneCounter) sum() int64 {
	var s int64
	for i := range d.shards {
		s += d.shards[i].n.Load()
	}
	return s
}

// runPath measures one point over one path, on a fresh client closed
// after it.
func runPath(ctx context.Context, env *runEnv, pt Point, path string) (measurement, error) {
	t, err := dialTarget(path, pt.Op, env.srv.addr)
	if err != nil {
		return measurement{}, err
	}
	defer t.close()
	m, err := runOn(ctx, env, t, pt, path)
	switch t := t.(type) {
	case *batchTarget:
		m.lanes = t.c.Info(t.addr).Lanes
	case *xTarget:
		m.lanes = t.lanes()
	}
	return m, err
}

// runOn measures one point on client t, which stays open. Nothing of the
// run (writers, histograms) outlives it but the measurement.
func runOn(ctx context.Context, env *runEnv, t target, pt Point, path string) (measurement, error) {
	m := measurement{clientPid: os.Getpid()}
	prof := payloads[pt.Payload]
	args := prof.args()

	if err := warmup(ctx, env, t, pt, prof, args); err != nil {
		return m, fmt.Errorf("warm-up: %w", err)
	}

	// Settle both processes and take the baselines. The clock starts only
	// when every writer exists and waits at the start line.
	resetOK := settleMemory()
	if _, err := env.ctl.reset(ctx); err != nil {
		return m, err
	}
	pctx, cancel := context.WithTimeout(ctx, env.cfg.PointTimeout)
	defer cancel()
	var (
		done  doneCounter
		errs  atomic.Int64
		first atomic.Pointer[error]
		hist  *benchkit.Histogram
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	if replied(pt.Op) {
		hist = new(benchkit.Histogram)
	}
	pace := time.Duration(pt.PaceMS) * time.Millisecond
	for w := range pt.Writers {
		wctx, op := t.op(pctx, pt.Op, prof, args, w)
		wg.Go(func() {
			<-start
			writer(wctx, w, pt.Messages, pace, op, hist, &done, &errs, &first)
		})
	}
	ctlBase, progBase := env.ctl.io.snapshot(), env.progress.snapshot()
	base := readUsage()
	samp := startSampler()
	stopProgress := startProgress(env, pt, path, &done)

	t0 := time.Now()
	close(start)
	wg.Wait() // every writer stops at its count or at pctx's end
	m.submitted = done.sum()
	m.ops = m.submitted
	if !replied(pt.Op) {
		// A cast or a send counts once the server has run it.
		left := env.cfg.PointTimeout - time.Since(t0)
		r, err := env.ctl.wait(ctx, m.submitted, max(left, time.Millisecond))
		if err != nil {
			stopProgress()
			samp.stop(false)
			return m, err
		}
		m.ops = min(r.N, m.submitted)
		m.bounded = !r.Reached
	}
	m.elapsed = time.Since(t0)
	stopProgress()
	m.clientG, m.clientRSS = samp.stop(resetOK)
	u := readUsage().sub(base)
	// What the harness itself wrote during the run (control calls,
	// progress lines) is not the path's.
	ctlIO := env.ctl.io.snapshot().sub(ctlBase)
	progIO := env.progress.snapshot().sub(progBase)
	if u.Writes >= 0 {
		u.Writes -= ctlIO.writes + progIO.writes
	}
	if u.Bytes >= 0 {
		u.Bytes -= ctlIO.bytes + progIO.bytes
	}
	m.client = u
	var err error
	if m.server, err = env.ctl.stats(ctx); err != nil {
		return m, err
	}
	// Writers cut short by the time bound did not reach their count.
	if m.submitted+errs.Load() < int64(pt.Writers*pt.Messages) && errs.Load() == 0 {
		m.bounded = true
	}
	if ctx.Err() != nil {
		return m, ctx.Err()
	}
	m.errs = errs.Load()
	if e := first.Load(); e != nil {
		m.firstErr = *e
	}
	if hist != nil {
		m.lat = hist.Quantiles(0.5, 0.99, 0.999)
	}
	return m, nil
}

// writer is one writer's loop: messages operations, a pause of pace
// between two, until done or ctx ends. A paced writer starts at a random
// moment within its first pause, so that N writers spread over the pace
// instead of firing together.
func writer(ctx context.Context, w, messages int, pace time.Duration, op opFunc, hist *benchkit.Histogram,
	done *doneCounter, errs *atomic.Int64, first *atomic.Pointer[error]) {
	var timer *time.Timer
	sleep := func(d time.Duration) bool {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if pace > 0 {
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		if !sleep(rand.N(pace)) {
			return
		}
	}
	for j := range messages {
		if ctx.Err() != nil {
			return
		}
		t := time.Now()
		if err := op(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if errs.Add(1) == 1 {
				first.Store(&err)
			}
			return // one failure ends this writer; the point reports it
		}
		if hist != nil {
			hist.Record(w, time.Since(t))
		}
		done.add(w)
		if pace > 0 && j < messages-1 && !sleep(pace) {
			return
		}
	}
}

// warmupWriters bounds the writers of a warm-up, and warmupPerWriter is
// the operations each makes at least in a round; rounds go on until
// warmupSpan has passed, at most warmupRounds of them.
const (
	warmupWriters   = 1000
	warmupPerWriter = 4
	warmupSpan      = 200 * time.Millisecond
	warmupRounds    = 50
)

// warmup runs a few operations on the fresh client, so that connection
// setup, lane start and first allocations are not measured; casts and
// sends are waited for on the server. It runs them from as many writers
// as the point has, up to warmupWriters, a few each: the batch client's
// lanes follow the load, and a point measures a client in its steady
// state, its pool grown (the growth from one lane is measured on its own:
// batchclient's TestBurstGrowsLanes).
func warmup(ctx context.Context, env *runEnv, t target, pt Point, prof *profile, args any) error {
	n := env.cfg.Warmup
	if n == 0 {
		return nil
	}
	if _, err := env.ctl.reset(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, env.cfg.PointTimeout)
	defer cancel()
	g := min(pt.Writers, warmupWriters)
	n = max(n, warmupPerWriter*g)
	var failed atomic.Pointer[error]
	// Rounds until warmupSpan has passed (at most warmupRounds): a pool
	// grows within tens of milliseconds of a heavy load.
	start, done := time.Now(), 0
	for round := 0; round == 0 || (round < warmupRounds && time.Since(start) < warmupSpan); round++ {
		var wg sync.WaitGroup
		for w := range g {
			c, op := t.op(wctx, pt.Op, prof, args, w)
			wg.Go(func() {
				for range n / g {
					if err := op(c); err != nil {
						failed.Store(&err)
						return
					}
				}
			})
		}
		wg.Wait()
		if e := failed.Load(); e != nil {
			return *e
		}
		done += n / g * g
	}
	if !replied(pt.Op) {
		r, err := env.ctl.wait(ctx, int64(done), env.cfg.PointTimeout)
		if err != nil {
			return err
		}
		if !r.Reached {
			return fmt.Errorf("server ran %d of %d warm-up %ss", r.N, done, pt.Op)
		}
	}
	_, err := env.ctl.stats(ctx) // ends the reset's sampler
	return err
}

// countingWriter counts the writes and bytes through it (one write
// syscall each, for an *os.File).
type countingWriter struct {
	w  io.Writer
	mu sync.Mutex
	io ioSnapshot
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.w.Write(b)
	c.io.writes++
	c.io.bytes += int64(n)
	return n, err
}

func (c *countingWriter) snapshot() ioSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.io
}
