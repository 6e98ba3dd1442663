package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/smallnest/rpcx/log"
)

// run executes cfg: the sweep (a server and a client process per path,
// points over every path, table, JSON lines, codec ceiling, report) or
// only the codec ceiling.
func run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	log.SetLogger(quietLogger{log.GetLogger()})
	if cfg.Mode == "codec" {
		cs, err := ceilings(ctx, cfg)
		if err != nil {
			return err
		}
		printCeilings(stdout, cs)
		return nil
	}

	points, skipped := cfg.Points()
	for _, s := range skipped {
		fmt.Fprintln(stderr, "skipped:", s)
	}
	if len(points) == 0 {
		return errors.New("no points to run")
	}

	host, prefix := "127.0.0.1", []string(nil)
	if cfg.Netns {
		ns, err := setupNetns(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		defer ns.cleanup(stderr)
		host, prefix = ns.serverIP, ns.execPrefix()
	}
	progress := &countingWriter{w: stderr}
	envs, err := startServers(ctx, cfg, host, prefix, progress)
	defer func() {
		for _, env := range envs.all() {
			env.ctl.close()
			env.srv.stop()
		}
	}()
	if err != nil {
		return err
	}
	for _, env := range envs.all() {
		if env.info, err = env.ctl.reset(ctx); err != nil {
			return err
		}
		if _, err := env.ctl.stats(ctx); err != nil {
			return err
		}
	}

	sink, err := openJSON(cfg.Out)
	if err != nil {
		return err
	}
	defer sink.close()

	paths := cfg.Paths
	clients, err := startClients(cfg, paths, envs, progress)
	defer func() {
		for _, cp := range clients {
			cp.stop()
		}
	}()
	if err != nil {
		return err
	}
	for _, path := range paths {
		if env := envs[path]; env != nil {
			fmt.Fprintf(stderr, "%s path: server pid %d on %s (GOMAXPROCS %d, %d lanes per batch client)\n",
				path, env.info.Pid, env.srv.addr, env.info.GOMAXPROCS, env.info.PoolSize)
		}
	}
	fmt.Fprintf(stderr, "%d points × %d paths × %d runs, each bounded by %v\n", len(points), len(paths), cfg.Repeat, cfg.PointTimeout)
	tableHeader(stdout, cfg.Repeat)
	var results []Result
	started := time.Now()
	for i, pt := range points {
		runs := map[string][]Result{}
		for round := range cfg.Repeat {
			// Alternate the paths' order, so that none always meets a
			// machine warmed (or tired) by the others.
			for _, path := range roundOrder(paths, i, round) {
				if !offers(path, pt.Op) {
					continue
				}
				fmt.Fprintf(progress, "point %d/%d%s: %s %s %s w=%d pace=%dms × %d messages\n",
					i+1, len(points), roundText(round, cfg.Repeat), pt.Op, path, pt.Payload, pt.Writers, pt.PaceMS, pt.Messages)
				m, err := clients[path].measure(ctx, pt, cfg.PointTimeout)
				if err != nil {
					return fmt.Errorf("%s %s %s w=%d: %w", pt.Op, path, pt.Payload, pt.Writers, err)
				}
				r := newResult(pt, path, m, envs[path], round, cfg.Repeat)
				if err := sink.write(r); err != nil {
					return err
				}
				runs[path] = append(runs[path], r)
			}
		}
		got := map[string]Result{}
		for _, path := range paths {
			if len(runs[path]) == 0 {
				continue
			}
			r := aggregate(runs[path])
			if r.Aggregate {
				if err := sink.write(r); err != nil {
					return err
				}
			}
			got[path] = r
			results = append(results, r)
		}
		tableRow(stdout, pt, got)
	}
	fmt.Fprintf(stderr, "sweep took %v\n", time.Since(started).Round(time.Second))
	cs, err := ceilings(ctx, cfg)
	if err != nil {
		return err
	}
	printCeilings(stdout, cs)
	printFractions(stdout, results, cs)
	if cfg.Out != "" {
		fmt.Fprintln(stderr, "results:", cfg.Out)
	}
	if cfg.Report != "" {
		if err := writeReport(cfg, results, cs, time.Since(started)); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "report:", cfg.Report+"/report.md")
	}
	return nil
}

// roundText is " round r/n" in progress lines, "" for single runs.
func roundText(round, repeats int) string {
	if repeats <= 1 {
		return ""
	}
	return fmt.Sprintf(" round %d/%d", round+1, repeats)
}

// ceilings measures the codec ceiling of every payload the sweeps use.
func ceilings(ctx context.Context, cfg Config) ([]Ceiling, error) {
	var names []string
	for _, s := range cfg.Sweeps {
		for _, p := range s.Payloads {
			if !slices.Contains(names, p) {
				names = append(names, p)
			}
		}
	}
	var out []Ceiling
	for _, n := range names {
		for _, codec := range []string{codecRPCX, codecBatch} {
			c, err := measureCeiling(ctx, n, codec, cfg.CodecDuration)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// printFractions prints each rpcxbatch point's throughput (batch and
// dropin paths) as a fraction of its payload's codec ceiling.
func printFractions(w io.Writer, results []Result, cs []Ceiling) {
	fmt.Fprintln(w, "\nrpcxbatch paths as a fraction of the codec ceiling:")
	for _, r := range results {
		if !batchTransport(r.Path) {
			continue
		}
		if f, ok := ceilingFraction(r, cs); ok {
			fmt.Fprintf(w, "  %-4s %-6s %-13s w=%-6d pace=%-4d %10.0f/s = %5.1f %%%s\n", r.Op, r.Path, r.Payload, r.Writers, r.PaceMS, r.OpsPerS, 100*f, lanesText(r))
		}
	}
}

// lanesText is the lanes an rpcxbatch point ended with, when known.
func lanesText(r Result) string {
	if r.Lanes <= 0 {
		return ""
	}
	return fmt.Sprintf("  (%d lanes)", r.Lanes)
}

// ceilingFraction is r's throughput over the ceiling of the codec it uses:
// the call ceiling for calls (call and go), the oneway one for casts and
// sends.
func ceilingFraction(r Result, cs []Ceiling) (float64, bool) {
	for _, c := range cs {
		if c.Payload != r.Payload || c.Codec != codecOf(r) {
			continue
		}
		bound := c.OnewayPerS
		if replied(r.Op) {
			bound = c.CallsPerS
		}
		if bound > 0 {
			return r.OpsPerS / bound, true
		}
	}
	return 0, false
}

// machine describes where the numbers were taken, for the report.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if v := procString(b, "model name"); v != "" {
			model = v
		}
	}
	return fmt.Sprintf("%s, %d logical cores", model, numCPU())
}
