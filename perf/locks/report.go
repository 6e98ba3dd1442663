package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// summary is the median run of one point.
type summary struct {
	p    point
	runs []Result // sorted by locks/s
}

func (s summary) median() Result { return s.runs[len(s.runs)/2] }

func summarize(results []Result) []summary {
	var out []summary
	for _, r := range results {
		p := point{r.Design, r.Engine, r.ClientsPerNode, r.TxnsPerClient}
		i := slices.IndexFunc(out, func(s summary) bool { return s.p == p })
		if i < 0 {
			out = append(out, summary{p: p})
			i = len(out) - 1
		}
		out[i].runs = append(out[i].runs, r)
	}
	for i := range out {
		slices.SortFunc(out[i].runs, func(a, b Result) int {
			switch {
			case a.LocksPerS < b.LocksPerS:
				return -1
			case a.LocksPerS > b.LocksPerS:
				return 1
			}
			return 0
		})
	}
	return out
}

// label names a point in tables and figures.
func (p point) label() string {
	switch p.Engine {
	case engineEtcd:
		return fmt.Sprintf("etcd Mutex, %s clients", thousands(float64(p.Clients)))
	case engineInproc:
		return "in-process, no transport (bound)"
	}
	return p.Engine
}

// writeReport writes report.md and locks.svg into cfg.Report.
func writeReport(cfg Config, results []Result, took time.Duration) error {
	if err := os.MkdirAll(cfg.Report, 0o755); err != nil {
		return fmt.Errorf("report folder: %w", err)
	}
	sums := summarize(results)
	fig := "locks.svg"
	if err := drawFigure(filepath.Join(cfg.Report, fig), sums); err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("# rpcxbatch lock benchmark (elock's designs)\n\n")
	fmt.Fprintf(&b, "- date: %s\n- machine: %s; %s %s/%s\n- command: `%s`\n- %d runs in %v; each row is the median of %d run(s) (by locks/s)\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		commandLine(), len(results), took.Round(time.Second), cfg.Repeat)
	if cfg.From != "" {
		fmt.Fprintf(&b, "- redrawn from %s (date and command above are the redraw's; each result carries its own time)\n", cfg.From)
	}
	b.WriteString("- two lock node processes on loopback, each with its own clients; fresh processes for every run; " +
		"locks/s = locks taken on both nodes ÷ the longer node's time. A two-node lock (designs 1 and 3) counts once.\n")
	if slices.ContainsFunc(sums, func(s summary) bool { return s.p.Engine == engineInproc }) {
		b.WriteString("- design 1's \"in-process, no transport (bound)\" row is a bound, not a competitor: both nodes in one process, " +
			"each calling the other's lock service directly on the caller's goroutine (arguments copied, nothing encoded). " +
			"Its CPU per lock is the lock layer, the clients and the Go runtime alone, which every transport pays too; " +
			"plain's CPU per lock over it is the most any transport could gain on plain rpcx with this lock layer (Ratios below).\n")
	}
	fmt.Fprintf(&b, "- designs 1 and 3 draw keys from a pool of %s; lock nodes' NodeTimeout %v\n\n", thousands(float64(cfg.Pool)), cfg.NodeTimeout)
	fmt.Fprintf(&b, "![locks per second for elock's designs 1, 3 and 4: rpcxbatch, plain rpcx and etcd's mutex](%s)\n\n", fig)
	b.WriteString("| design | engine | clients per node | txns per client | locks/s | locks | time s | deadlock retries | restarted txns | errors | CPU µs per lock | CPU s per node | peak RSS MB per node | load at start | notes |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|---|---|\n")
	for _, s := range sums {
		r := s.median()
		var notes []string
		if r.Bounded {
			notes = append(notes, "bounded by -point-timeout")
		}
		if r.FirstError != "" {
			notes = append(notes, "first error: "+r.FirstError)
		}
		if r.LostHolders > 0 {
			notes = append(notes, fmt.Sprintf("%d holders dropped as lost (missed pings)", r.LostHolders))
		}
		if r.Engine == engineInproc {
			notes = append(notes, "a bound, not a competitor: both nodes in one process, no transport; CPU and RSS are the process's")
		}
		if len(s.runs) > 1 {
			notes = append(notes, fmt.Sprintf("runs %s–%s locks/s", thousands(s.runs[0].LocksPerS), thousands(s.runs[len(s.runs)-1].LocksPerS)))
		}
		restart := "-"
		if r.Design == 3 {
			restart = fmt.Sprintf("%d (%.2f %%)", r.RestartedTxns, 100*r.RestartShare)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %s | %s | %.2f | %d | %s | %d | %s | %s | %s | %s | %s |\n",
			r.Design, s.p.label(), thousands(float64(r.ClientsPerNode)), r.TxnsPerClient, thousands(r.LocksPerS),
			thousands(float64(r.Locks)), r.ElapsedS, r.Retries, restart, r.Errors, cpuPerLock(r), floats(r.NodeCPUs, 1),
			floats(r.NodeRSSMB, 0), r.LoadAvg, strings.Join(notes, "; "))
	}
	b.WriteString("\nCPU µs per lock is both lock nodes' CPU time (user + system) over the locks taken: on a shared machine it moves " +
		"less than locks/s. etcd's own process is not in it.\n")
	b.WriteString("\n## Ratios\n\n")
	for _, line := range ratios(sums) {
		b.WriteString("- " + line + "\n")
	}
	if err := os.WriteFile(filepath.Join(cfg.Report, "report.md"), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// ratios are the comparisons, from the medians.
func ratios(sums []summary) []string {
	find := func(design int, engine string) (Result, bool) {
		for _, s := range sums {
			if s.p.Design == design && s.p.Engine == engine {
				return s.median(), true
			}
		}
		return Result{}, false
	}
	var out []string
	batch, ok := find(1, engineBatch)
	if ok {
		if plain, ok := find(1, enginePlain); ok && plain.LocksPerS > 0 {
			out = append(out, fmt.Sprintf("design 1: rpcxbatch %s locks/s = %.2f× plain rpcx (%s); run by run %s; CPU per lock %.2f× less",
				thousands(batch.LocksPerS), batch.LocksPerS/plain.LocksPerS, thousands(plain.LocksPerS), paired(sums, 1, engineBatch, enginePlain), cpuRatio(plain, batch)))
		}
		best := 0.0
		for _, s := range sums {
			if s.p.Design == 1 && s.p.Engine == engineEtcd {
				best = max(best, s.median().LocksPerS)
			}
		}
		if best > 0 {
			out = append(out, fmt.Sprintf("design 1: rpcxbatch = %.1f× etcd's mutex at its best client count (%s locks/s)", batch.LocksPerS/best, thousands(best)))
		}
	}
	out = append(out, boundLines(sums)...)
	if b3, ok := find(3, engineBatch); ok {
		if p3, ok := find(3, enginePlain); ok && p3.LocksPerS > 0 {
			out = append(out, fmt.Sprintf("design 3: rpcxbatch %s locks/s = %.2f× plain rpcx (%s); run by run %s; restarted transactions %.2f %% and %.2f %%",
				thousands(b3.LocksPerS), b3.LocksPerS/p3.LocksPerS, thousands(p3.LocksPerS), paired(sums, 3, engineBatch, enginePlain), 100*b3.RestartShare, 100*p3.RestartShare))
		}
	}
	if l4, ok := find(4, engineLocal); ok {
		out = append(out, fmt.Sprintf("design 4: %s shared local locks/s on both nodes together", thousands(l4.LocksPerS)))
	}
	return out
}

// paired is the ratio a/b of each run (runs of one round ran back to
// back), in run order.
func paired(sums []summary, design int, a, b string) string {
	byRun := func(engine string) map[int]float64 {
		m := map[int]float64{}
		for _, s := range sums {
			if s.p.Design == design && s.p.Engine == engine {
				for _, r := range s.runs {
					m[r.Run] = r.LocksPerS
				}
			}
		}
		return m
	}
	ra, rb := byRun(a), byRun(b)
	var out []string
	for run := 0; run < len(ra); run++ {
		if x, y := ra[run], rb[run]; y > 0 {
			out = append(out, fmt.Sprintf("%.2f×", x/y))
		}
	}
	return strings.Join(out, ", ")
}

func cpuOf(r Result) float64 {
	t := 0.0
	for _, c := range r.NodeCPUs {
		t += c
	}
	return t
}

func cpuPerLock(r Result) string {
	if r.Locks == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", cpuOf(r)*1e6/float64(r.Locks))
}

// cpuRatio is how many times more CPU per lock a took than b.
func cpuRatio(a, b Result) float64 {
	if a.Locks == 0 || b.Locks == 0 || cpuOf(b) == 0 {
		return 0
	}
	return (cpuOf(a) / float64(a.Locks)) / (cpuOf(b) / float64(b.Locks))
}

func floats(v []float64, prec int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.*f", prec, x)
	}
	return strings.Join(s, " / ")
}

// thousands formats v rounded, with separators: 1,234,567.
var thousands = benchkit.Thousands

func commandLine() string {
	return strings.TrimSpace("go run ./perf/locks " + strings.Join(os.Args[1:], " "))
}

// machine describes where the numbers were taken.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d logical cores", model, runtime.NumCPU())
}
