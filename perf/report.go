package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rpcxbatch/rpcxbatch/perf/internal/benchkit"
)

// writeReport writes the report folder: report.md (throughput tables with
// the figures, the resources table, the codec ceiling and the batch path's
// fraction of it, and, when mem is not nil, the memory the load left
// behind), the figures, and ceiling.json.
func writeReport(cfg Config, results []Result, cs []Ceiling, mem *afterLoad, took time.Duration) error {
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
	fmt.Fprintf(&b, "- date: %s\n- machine: %s; %s %s/%s\n- command: `%s`\n- sweep: %d points × 2 paths in %v\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		commandLine(), len(results)/2, took.Round(time.Second))
	if len(results) > 0 {
		fmt.Fprintf(&b, "- server: own process, GOMAXPROCS %d; batch client: lanes follow the load, up to the server's pool (%d at most in this run); plain: one rpcx `*client.Client`\n",
			results[0].GOMAXPROCS, batchLanes(results))
	}
	if cfg.Netns {
		fmt.Fprintf(&b, "- link: veth pair into a network namespace, netem rate %q delay %q\n", cfg.NetemRate, cfg.NetemDelay)
	} else {
		fmt.Fprintf(&b, "- link: loopback, client and server share the machine's cores\n")
	}
	servers := "each path against a server process of its own (idle while the other path runs), so that a path's server RSS and goroutines are its own"
	if cfg.SharedServer {
		servers = "against the same server process (`-shared-server`)"
	}
	b.WriteString("\nHow to read: each point runs both paths back to back, " + servers + "; " +
		"ratio = rpcxbatch ops/s ÷ plain rpcx ops/s. Cast and send points end when the server has run every operation. " +
		"CPU is user + system time of each process over the point; writes are write syscalls (`syscw`), bytes are `wchar`, " +
		"both from `/proc/self/io`, less the harness's own control and progress traffic. " +
		"A point marked bounded hit `-point-timeout` before its count.\n")

	b.WriteString("\n## Throughput\n\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "![%s](%s)\n\n", f.Alt, f.File)
	}
	for _, g := range groupsOf(results) {
		fmt.Fprintf(&b, "### %s payload, %s\n\n", g.Payload, paceText(g.PaceMS))
		b.WriteString("| op | writers | intended/s | plain/s | batch/s | ratio | p50 µs plain | p50 µs batch | p99 µs plain | p99 µs batch | p99.9 µs plain | p99.9 µs batch | notes |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, pr := range pairs(results, g) {
			p, q := pr[0], pr[1]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				p.Op, thousands(float64(p.Writers)), optThousands(q.IntendedPerS), thousands(p.OpsPerS), thousands(q.OpsPerS), ratio(p, q),
				fmtOpt(p.P50us, 0), fmtOpt(q.P50us, 0), fmtOpt(p.P99us, 0), fmtOpt(q.P99us, 0), fmtOpt(p.P999us, 0), fmtOpt(q.P999us, 0), notes(p, q))
		}
		b.WriteString("\n")
	}

	b.WriteString("## Resources\n\nPer point and path: CPU µs per operation of the client and server processes, their peak RSS, " +
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

	if mem != nil {
		b.WriteString(mem.markdown())
	}

	b.WriteString("\n## Codec ceiling\n\nIn one process, on all cores, with no transport: msgpack encoding and decoding of the payload, " +
		"and of the reply for a call, with each codec. `rpcx` is rpcx's `share.Codecs[protocol.MsgPack]`, which the plain path uses " +
		"(and both paths for sends, whose bytes the harness encodes); `rpcxbatch` is the batch path's encoding of call and cast payloads " +
		"(the same bytes, see `internal/fastcodec`). Every transport on this machine pays at least its codec's cost per operation, " +
		"so the ceiling bounds what it can reach here. The two rows' ratio is what the batch path gains from its codec alone.\n\n")
	b.WriteString("| payload | codec | bytes | calls/s bound | CPU µs per call | oneway/s bound | CPU µs per oneway |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.2f | %s | %.2f |\n", c.Payload, c.Codec, c.PayloadBytes, thousands(c.CallsPerS), c.CPUusPerCall, thousands(c.OnewayPerS), c.CPUusPerOneway)
	}
	b.WriteString("\nEach path as a fraction of its own codec's ceiling (calls against the call bound, casts and sends against the oneway bound):\n\n")
	b.WriteString("| op | payload | pace | writers | batch/s | fraction of ceiling | plain fraction |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, g := range groupsOf(results) {
		for _, pr := range pairs(results, g) {
			p, q := pr[0], pr[1]
			fq, okq := ceilingFraction(q, cs)
			fp, _ := ceilingFraction(p, cs)
			if okq {
				fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %.1f %% | %.1f %% |\n", q.Op, q.Payload, q.PaceMS, thousands(float64(q.Writers)), thousands(q.OpsPerS), 100*fq, 100*fp)
			}
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

// pairs returns the [plain, batch] results of a group, in run order.
func pairs(results []Result, g group) [][2]Result {
	var out [][2]Result
	for _, p := range results {
		if p.Path != pathPlain || p.Payload != g.Payload || p.PaceMS != g.PaceMS {
			continue
		}
		for _, q := range results {
			if q.Path == pathBatch && q.Payload == p.Payload && q.PaceMS == p.PaceMS && q.Op == p.Op && q.Writers == p.Writers {
				out = append(out, [2]Result{p, q})
				break
			}
		}
	}
	return out
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

func ratio(plain, batch Result) string {
	if plain.OpsPerS <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", batch.OpsPerS/plain.OpsPerS)
}

func notes(plain, batch Result) string {
	var n []string
	for _, r := range []Result{plain, batch} {
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
