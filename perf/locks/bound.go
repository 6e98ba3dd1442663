package main

import (
	"fmt"
	"slices"
)

// The in-process bound, read against the transports. On this benchmark
// the node processes are CPU-bound, so locks/s is about the cores over
// the CPU a lock costs (both nodes). The in-process engine's CPU per
// lock is the lock layer, the clients and the runtime with no transport;
// a transport adds its own on top. So plain's CPU per lock over the
// bound's is the most any transport could gain on plain rpcx with the
// lock layer as it is, and each engine's CPU per lock less the bound's
// is what its transport costs a lock.

// inprocNote says in the JSON what the in-process engine's rows are.
const inprocNote = "bound, not a competitor: both nodes in one process calling each other's lock service directly (no transport); node_cpu_s and node_peak_rss_mb are that one process's"

// cpuPerLockRuns is the median over s's runs of both nodes' CPU µs per
// lock, and its range.
func cpuPerLockRuns(s summary) (median, lo, hi float64) {
	var v []float64
	for _, r := range s.runs {
		if r.Locks > 0 {
			v = append(v, cpuOf(r)*1e6/float64(r.Locks))
		}
	}
	if len(v) == 0 {
		return 0, 0, 0
	}
	slices.Sort(v)
	return v[len(v)/2], v[0], v[len(v)-1]
}

// boundLines are the report's lines on design 1's in-process bound.
func boundLines(sums []summary) []string {
	cpu := map[string]float64{}
	var lines []string
	for _, engine := range []string{engineInproc, engineBatch, enginePlain} {
		i := slices.IndexFunc(sums, func(s summary) bool { return s.p.Design == 1 && s.p.Engine == engine })
		if i < 0 {
			continue
		}
		m, lo, hi := cpuPerLockRuns(sums[i])
		if m == 0 {
			continue
		}
		cpu[engine] = m
		lines = append(lines, fmt.Sprintf("design 1, CPU per lock (both nodes, median of %d runs): %s %.1f µs (runs %.1f–%.1f)",
			len(sums[i].runs), sums[i].p.label(), m, lo, hi))
	}
	in, plain, batch := cpu[engineInproc], cpu[enginePlain], cpu[engineBatch]
	if in == 0 || plain == 0 {
		return lines
	}
	lines = append(lines, fmt.Sprintf("design 1 bound: with today's lock layer no transport can beat plain rpcx by more than %.2f× "+
		"(plain's CPU per lock over the in-process bound's); run by run, in-process locks/s = %s plain's",
		plain/in, paired(sums, 1, engineInproc, enginePlain)))
	if batch > 0 {
		less := ""
		if batch > in && plain > in {
			less = fmt.Sprintf(" (%.2f× less)", (plain-in)/(batch-in))
		}
		lines = append(lines, fmt.Sprintf("design 1, transport's CPU per lock (engine less the bound): rpcxbatch %.1f µs, plain rpcx %.1f µs%s",
			batch-in, plain-in, less))
	}
	if need := plain / 3; need > in {
		lines = append(lines, fmt.Sprintf("design 1: 3× plain needs %.1f µs a lock, which leaves a transport %.1f µs", need, need-in))
	} else {
		lines = append(lines, fmt.Sprintf("design 1: 3× plain needs %.1f µs a lock, below the bound's %.1f µs: out of reach of any transport with this lock layer", need, in))
	}
	return lines
}
