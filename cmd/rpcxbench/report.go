package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// printHeader says what is measured, against which servers, and shows
// the first call's reply.
func printHeader(w io.Writer, cfg Config, ss []server, reply string) {
	how := fmt.Sprintf("%v per path at each concurrency", cfg.Duration)
	if cfg.Count > 0 {
		how = fmt.Sprintf("%s calls per path at each concurrency", benchkit.Thousands(float64(cfg.Count)))
	}
	deadline := "no deadline per call"
	if cfg.Timeout > 0 {
		deadline = fmt.Sprintf("a %v deadline per call", cfg.Timeout)
	}
	fmt.Fprintf(w, "%s.%s, %s arguments, %s in %d round(s), paths interleaved, %s\n",
		cfg.Service, cfg.Method, cfg.SerializeName, how, cfg.Rounds, deadline)
	fmt.Fprintf(w, "servers (%s):\n", discoveryText(cfg))
	for _, s := range ss {
		fmt.Fprintf(w, "  %s  %s\n", s.Addr, pluginText(s))
	}
	fmt.Fprintf(w, "reply to the first call: %s\n\n", reply)
}

// discoveryText names the discovery.
func discoveryText(cfg Config) string {
	if len(cfg.Etcd) > 0 {
		return fmt.Sprintf("etcd at %s, base path %s", strings.Join(cfg.Etcd, ","), cfg.BasePath)
	}
	return "static list"
}

// pluginText says what the drop-in found on a server.
func pluginText(s server) string {
	switch s.Plugin {
	case "yes":
		return fmt.Sprintf("rpcxbatch plugin: the drop-in calls it over %d lane(s)", s.Lanes)
	case "no":
		return "no rpcxbatch plugin: the drop-in falls back to plain rpcx there (as it would in your service)"
	case "advertised no":
		return "registered without the rpcxbatch plugin (rpcxbatch=0): the drop-in calls it over plain rpcx"
	case "not tcp":
		return "not a tcp server: plain rpcx on both paths"
	}
	return "not called by the drop-in yet"
}

// The table: a row per concurrency, the two paths side by side.
func tableHeader(w io.Writer) {
	fmt.Fprintf(w, "%11s | %-30s | %-13s | %-13s | %-15s | %-13s | %s\n",
		"", "calls/s", "p50 µs", "p99 µs", "p99.9 µs", "client CPU", "errors")
	fmt.Fprintf(w, "%11s | %9s %9s %10s | %6s %6s | %6s %6s | %7s %7s | %6s %6s | %s\n",
		"concurrency", "rpcx", "drop-in", "drop÷rpcx", "rpcx", "drop", "rpcx", "drop", "rpcx", "drop", "rpcx", "drop", "rpcx, drop-in")
}

func tableRow(w io.Writer, r row) {
	p, d := r.Paths[pathPlainX], r.Paths[pathDropin]
	q := func(x *pathResult, i int) string {
		if qs := x.quantiles(); qs != nil {
			return fmt.Sprintf("%.0f", qs[i])
		}
		return "-"
	}
	cpu := func(x *pathResult) string {
		if v := x.cpuPerCall(); v >= 0 {
			return fmt.Sprintf("%.1f", v)
		}
		return "-"
	}
	line := fmt.Sprintf("%11d | %9s %9s %10s | %6s %6s | %6s %6s | %7s %7s | %6s %6s | %s, %s",
		r.Concurrency, benchkit.Thousands(p.callsPerS()), benchkit.Thousands(d.callsPerS()), ratioText(r),
		q(p, 0), q(d, 0), q(p, 1), q(d, 1), q(p, 2), q(d, 2), cpu(p), cpu(d),
		benchkit.Thousands(float64(p.errors())), benchkit.Thousands(float64(d.errors())))
	switch pluginSummary(r.Servers) {
	case "no":
		line += "  (no plugin: the drop-in ran over plain rpcx)"
	case "mixed":
		line += "  (some servers without the plugin)"
	}
	fmt.Fprintln(w, line)
}

// ratio is the drop-in's calls/s over rpcx's XClient's; 0 when rpcx's
// made none.
func (r row) ratio() float64 {
	p := r.Paths[pathPlainX].callsPerS()
	if p <= 0 {
		return 0
	}
	return r.Paths[pathDropin].callsPerS() / p
}

func ratioText(r row) string {
	if v := r.ratio(); v > 0 {
		return fmt.Sprintf("%.2f×", v)
	}
	return "-"
}

// printErrors lists the errors by kind, with the first of each, under the
// table; nothing when there were none.
func printErrors(w io.Writer, rows []row) {
	first := true
	for _, r := range rows {
		for _, path := range paths {
			errs := r.Paths[path].Errors
			for _, k := range slices.Sorted(maps.Keys(errs)) {
				if first {
					fmt.Fprintln(w, "\nerrors by kind (the first of each):")
					first = false
				}
				fmt.Fprintf(w, "  c=%d %s: %s %s (%s)\n", r.Concurrency, pathLabel[path], benchkit.Thousands(float64(errs[k].N)), k, errs[k].First)
			}
		}
	}
}

// printFooter says how to read the table.
func printFooter(w io.Writer, cfg Config, ss []server) {
	fmt.Fprintf(w, "\nrpcx = rpcx's client.NewXClient, drop-in = batchclient.NewXClient, both %s; latencies of the calls that succeeded; "+
		"client CPU = this process's CPU µs per call (the server's is not counted)\n", failText(cfg))
	if pluginSummary(ss) == "no" {
		fmt.Fprintln(w, "no server has the rpcxbatch plugin: the drop-in ran over plain rpcx, so its figures are plain rpcx's; add batchserver.New(s) to the server to compare")
	}
}

func failText(cfg Config) string {
	var fail, sel string
	for k, v := range failModes {
		if v == cfg.FailMode {
			fail = k
		}
	}
	for k, v := range selectModes {
		if v == cfg.SelectMode {
			sel = k
		}
	}
	return fail + ", " + sel
}

// line is one JSON line: one path at one concurrency.
type line struct {
	Time        string               `json:"time"`
	Service     string               `json:"service"`
	Method      string               `json:"method"`
	Serialize   string               `json:"serialize"`
	Discovery   string               `json:"discovery"`
	Concurrency int                  `json:"concurrency"`
	Path        string               `json:"path"`
	Calls       int64                `json:"calls"`
	Errors      int64                `json:"errors"`
	ErrorsBy    map[string]*errCount `json:"errors_by_kind"`
	ElapsedS    float64              `json:"elapsed_s"`
	CallsPerS   float64              `json:"calls_per_s"`
	RoundsPerS  []float64            `json:"calls_per_s_rounds"`
	P50us       *float64             `json:"p50_us"`
	P99us       *float64             `json:"p99_us"`
	P999us      *float64             `json:"p999_us"`
	CPUusPerOp  *float64             `json:"client_cpu_us_per_call"`
	// Ratio is the drop-in's calls/s over rpcx's XClient's (dropin lines).
	Ratio *float64 `json:"dropin_over_plainx,omitempty"`
	// Plugin sums up Servers: yes, no, mixed or unknown.
	Plugin  string   `json:"plugin"`
	Servers []server `json:"servers"`
}

func writeJSON(w io.Writer, cfg Config, r row) error {
	enc := json.NewEncoder(w)
	for _, path := range paths {
		p := r.Paths[path]
		l := line{Time: time.Now().UTC().Format(time.RFC3339), Service: cfg.Service, Method: cfg.Method, Serialize: cfg.SerializeName,
			Discovery: discoveryText(cfg), Concurrency: r.Concurrency, Path: path, Calls: p.Calls, Errors: p.errors(), ErrorsBy: p.Errors,
			ElapsedS: p.Elapsed.Seconds(), CallsPerS: p.callsPerS(), RoundsPerS: p.Rounds, Plugin: pluginSummary(r.Servers), Servers: r.Servers}
		if qs := p.quantiles(); qs != nil {
			l.P50us, l.P99us, l.P999us = &qs[0], &qs[1], &qs[2]
		}
		if v := p.cpuPerCall(); v >= 0 {
			l.CPUusPerOp = &v
		}
		if v := r.ratio(); path == pathDropin && v > 0 {
			l.Ratio = &v
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	return nil
}
