package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// writeReport writes the report folder: report.md (throughput tables with
// the figures, the resources table, the codec ceiling and the batch path's
// fraction of it), the figures, and ceiling.json.
func writeReport(cfg Config, results []Result, cs []Ceiling, took time.Duration) error {
	dir := cfg.Report
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report folder: %w", err)
	}
	figs, err := drawFigures(dir, results, cs)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# rpcxbatch perf report\n\n")
	paths := resultPaths(results)
	fmt.Fprintf(&b, "- date: %s\n- machine: %s; %s %s/%s\n- command: `%s`\n- sweep: %d points × %d paths (%s) in %v\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		commandLine(), len(pointRows(results, nil)), len(paths), strings.Join(paths, ", "), took.Round(time.Second))
	if len(results) > 0 {
		fmt.Fprintf(&b, "- server: own process, GOMAXPROCS %d; plain: one rpcx `*client.Client`; plainx: rpcx's `client.NewXClient`; "+
			"batch: one `batchclient.Client`, lanes follow the load, up to the server's pool (%d at most in this run); "+
			"dropin: `batchclient.NewXClient` (the same arguments as rpcx's); both XClients Failtry, RandomSelect, over peer-to-peer discovery\n",
			results[0].GOMAXPROCS, batchLanes(results))
	}
	if t := repeatText(cfg.Repeat); t != "" {
		fmt.Fprintf(&b, "- repeats: every table gives %s; the JSON lines hold every run (`repeat` 0 to %d) and each path's aggregate (`\"aggregate\": true`)\n", t, cfg.Repeat-1)
	}
	if cfg.Netns {
		fmt.Fprintf(&b, "- link: veth pair into a network namespace, netem rate %q delay %q\n", cfg.NetemRate, cfg.NetemDelay)
	} else {
		fmt.Fprintf(&b, "- link: loopback, client and server share the machine's cores\n")
	}
	servers := "each path against a server process of its own (idle while the other paths run), so that a path's server RSS and goroutines are its own"
	clients := "each path driven from a client process of its own, which runs only that path's points"
	b.WriteString("\nHow to read: each point runs every path back to back, " + servers + ", " + clients + "; " +
		"batch ÷ plain = the direct Client's ops/s ÷ rpcx's Client's, dropin ÷ plainx = the drop-in XClient's ÷ rpcx's XClient's, " +
		"dropin ÷ batch = what the drop-in keeps of the direct Client. An XClient has no send: n/a. " +
		"`go` is the call made with `Go` and waited for on its Done channel. " +
		"Cast and send points end when the server has run every operation. " +
		"CPU is user + system time of each process over the point; writes are write syscalls (`syscw`), bytes are `wchar`, " +
		"both from `/proc/self/io`, less the harness's own control and progress traffic. " +
		"A point marked bounded hit `-point-timeout` before its count.\n")

	b.WriteString("\n## Throughput\n\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "![%s](%s)\n\n", f.Alt, f.File)
	}
	for _, g := range groupsOf(results) {
		fmt.Fprintf(&b, "### %s payload, %s\n\n", g.Payload, paceText(g.PaceMS))
		b.WriteString("| op | writers | intended/s |")
		for _, p := range paths {
			b.WriteString(" " + p + "/s |")
		}
		for _, rc := range reportRatios {
			fmt.Fprintf(&b, " %s ÷ %s |", rc[0], rc[1])
		}
		for _, q := range []string{"p50", "p99", "p99.9"} {
			for _, p := range paths {
				fmt.Fprintf(&b, " %s µs %s |", q, p)
			}
		}
		b.WriteString(" notes |\n|---|--:|--:|" + strings.Repeat("--:|", len(paths)*4+len(reportRatios)) + "---|\n")
		for _, got := range pointRows(results, &g) {
			pt := anyResult(got)
			fmt.Fprintf(&b, "| %s | %s | %s |", pt.Op, thousands(float64(pt.Writers)), optThousands(pt.IntendedPerS))
			for _, p := range paths {
				b.WriteString(" " + cellOf(got, p, pt.Op, func(r Result) string { return thousands(r.OpsPerS) }) + " |")
			}
			for _, rc := range reportRatios {
				b.WriteString(" " + ratio(got, rc[0], rc[1]) + " |")
			}
			for _, q := range []func(Result) *float64{
				func(r Result) *float64 { return r.P50us },
				func(r Result) *float64 { return r.P99us },
				func(r Result) *float64 { return r.P999us },
			} {
				for _, p := range paths {
					b.WriteString(" " + cellOf(got, p, pt.Op, func(r Result) string { return fmtOpt(q(r), 0) }) + " |")
				}
			}
			b.WriteString(" " + notes(got) + " |\n")
		}
		b.WriteString("\n")
	}

	each := "Per point and path"
	if cfg.Repeat > 1 {
		each += fmt.Sprintf(" (of its %d runs, the one of median throughput, with each CPU per operation the median of its own)", cfg.Repeat)
	}
	b.WriteString("## Resources\n\n" + each + ": CPU µs per operation of the client and server processes, their peak RSS, " +
		"write syscalls and bytes written per operation on each side, peak goroutines, and the average entries per batch frame " +
		"the server received (avg reply batch: replies per reply frame).\n\n")
	b.WriteString("| op | payload | pace | writers | path | cpu µs/op client | cpu µs/op server | RSS MB client | RSS MB server | writes/op client | writes/op server | bytes/op client | bytes/op server | goroutines client | goroutines server | avg batch | avg reply batch |\n")
	b.WriteString("|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Op, r.Payload, r.PaceMS, thousands(float64(r.Writers)), r.Path, fmtOpt(r.ClientCPUusPerOp, 1), fmtOpt(r.ServerCPUusPerOp, 1),
			r.ClientRSSMB, r.ServerRSSMB, fmtOpt(r.ClientWritesPerOp, 3), fmtOpt(r.ServerWritesPerOp, 3),
			fmtOpt(r.ClientBytesPerOp, 0), fmtOpt(r.ServerBytesPerOp, 0), thousands(float64(r.ClientGoroutines)),
			thousands(float64(r.ServerGoroutines)), fmtOpt(r.AvgBatch, 1), fmtOpt(r.AvgReplyBatch, 1))
	}

	b.WriteString("\n## Codec ceiling\n\nIn one process, on all cores, with no transport: msgpack encoding and decoding of the payload, " +
		"and of the reply for a call, with each codec. `rpcx` is rpcx's `share.Codecs[protocol.MsgPack]`, which the plain path uses " +
		"(and both paths for sends, whose bytes the harness encodes); `rpcxbatch` is the batch path's encoding of call and cast payloads " +
		"(the same bytes, see `internal/fastcodec`), which the drop-in uses too. Every transport on this machine pays at least its codec's cost per operation, " +
		"so the ceiling bounds what it can reach here. The two rows' ratio is what the batch path gains from its codec alone.\n\n")
	b.WriteString("| payload | codec | bytes | calls/s bound | CPU µs per call | oneway/s bound | CPU µs per oneway |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.2f | %s | %.2f |\n", c.Payload, c.Codec, c.PayloadBytes, thousands(c.CallsPerS), c.CPUusPerCall, thousands(c.OnewayPerS), c.CPUusPerOneway)
	}
	b.WriteString("\nEach path as a fraction of its own codec's ceiling (calls against the call bound, casts and sends against the oneway bound):\n\n")
	b.WriteString("| op | payload | pace | writers |")
	for _, p := range paths {
		b.WriteString(" " + p + " fraction |")
	}
	b.WriteString("\n|---|---|--:|--:|" + strings.Repeat("--:|", len(paths)) + "\n")
	for _, g := range groupsOf(results) {
		for _, got := range pointRows(results, &g) {
			pt := anyResult(got)
			fmt.Fprintf(&b, "| %s | %s | %d | %s |", pt.Op, pt.Payload, pt.PaceMS, thousands(float64(pt.Writers)))
			for _, p := range paths {
				b.WriteString(" " + cellOf(got, p, pt.Op, func(r Result) string {
					if f, ok := ceilingFraction(r, cs); ok {
						return fmt.Sprintf("%.1f %%", 100*f)
					}
					return "-"
				}) + " |")
			}
			b.WriteString("\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	cj, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return fmt.Errorf("ceiling.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ceiling.json"), append(cj, '\n'), 0o644); err != nil {
		return fmt.Errorf("ceiling.json: %w", err)
	}
	return nil
}

// reportRatios are the throughput ratios the report gives, numerator
// first: the direct Client against rpcx's Client, the drop-in XClient
// against rpcx's XClient, and the drop-in against the direct Client.
var reportRatios = [][2]string{{pathBatch, pathPlain}, {pathDropin, pathPlainX}, {pathDropin, pathBatch}}

// resultPaths are the paths that have results, in allPaths order.
func resultPaths(results []Result) []string {
	var out []string
	for _, p := range allPaths {
		if slices.ContainsFunc(results, func(r Result) bool { return r.Path == p }) {
			out = append(out, p)
		}
	}
	return out
}

// pointRows returns each point's results by path, in run order; with g,
// only the points of that group.
func pointRows(results []Result, g *group) []map[string]Result {
	type key struct {
		op, payload     string
		writers, paceMS int
	}
	var out []map[string]Result
	index := map[key]int{}
	for _, r := range results {
		if g != nil && (r.Payload != g.Payload || r.PaceMS != g.PaceMS) {
			continue
		}
		k := key{r.Op, r.Payload, r.Writers, r.PaceMS}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, map[string]Result{})
		}
		out[i][r.Path] = r
	}
	return out
}

// anyResult is one of a point's results, for what all of them share (op,
// writers, pace, intended rate).
func anyResult(got map[string]Result) Result {
	for _, p := range allPaths {
		if r, ok := got[p]; ok {
			return r
		}
	}
	return Result{}
}

// cellOf is v of path's result, "n/a" when the path has no such operation
// and "-" when it did not run.
func cellOf(got map[string]Result, path, op string, v func(Result) string) string {
	if r, ok := got[path]; ok {
		return v(r)
	}
	if !offers(path, op) {
		return "n/a"
	}
	return "-"
}

// batchLanes is the most lanes a batch client had at the end of a point.
func batchLanes(results []Result) int {
	most := 0
	for _, r := range results {
		if r.Path == pathBatch {
			most = max(most, r.Lanes)
		}
	}
	return most
}

// ratio is num's ops/s over den's in a point, "-" when either is missing.
func ratio(got map[string]Result, num, den string) string {
	n, okn := got[num]
	d, okd := got[den]
	if !okn || !okd || d.OpsPerS <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", n.OpsPerS/d.OpsPerS)
}

func notes(got map[string]Result) string {
	var n []string
	for _, p := range allPaths {
		r, ok := got[p]
		if !ok {
			continue
		}
		if r.PctIntended != nil {
			n = append(n, fmt.Sprintf("%s %.0f %% of intended", r.Path, *r.PctIntended))
		}
		if r.Bounded {
			n = append(n, r.Path+" bounded")
		}
		if r.Errors > 0 {
			n = append(n, fmt.Sprintf("%s %d errors", r.Path, r.Errors))
		}
	}
	n = append(n, roundRatioNotes(got)...)
	return strings.Join(n, "; ")
}

// thousands formats v rounded, with separators: 1,234,567.
var thousands = benchkit.Thousands

func optThousands(v *float64) string {
	if v == nil {
		return "-"
	}
	return thousands(*v)
}

// commandLine is how this run was invoked, for the report.
func commandLine() string {
	return strings.TrimSpace("perf " + strings.Join(os.Args[1:], " "))
}
