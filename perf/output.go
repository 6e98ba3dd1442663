package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Result is one point over one path: one JSON line. Fields that do not
// apply (latency of a cast, batch size of plain rpcx, intended rate of a
// closed loop) are null.
//
// With -repeat N (N > 1) each path runs each point N times: every run is
// a line with its round in Repeat, and after the point's runs each path
// has one more line with Aggregate true (aggregate in repeat.go), which is
// what the table and report show: the run of median ops/s (the lower of
// the middle two for an even N), with OpsPerS, PctIntended and the CPU per
// operation (ClientCPUusPerOp, ServerCPUusPerOp, CPUusPerOp) replaced by
// each one's own median over the N runs, the spread in the Min and Max
// fields, every round's ops/s in OpsPerSRuns, Errors summed and Bounded if
// any run was. Its other fields (latency, RSS, writes, elapsed time) are
// the median run's.
type Result struct {
	Time              string   `json:"time"`
	Op                string   `json:"op"`
	Path              string   `json:"path"`
	Payload           string   `json:"payload"`
	PayloadBytes      int      `json:"payload_bytes"`
	Writers           int      `json:"writers"`
	PaceMS            int      `json:"pace_ms"`
	MessagesPerWriter int      `json:"messages_per_writer"`
	TargetOps         int64    `json:"target_ops"`
	Ops               int64    `json:"ops"`
	Errors            int64    `json:"errors"`
	FirstError        string   `json:"first_error,omitempty"`
	ElapsedS          float64  `json:"elapsed_s"`
	OpsPerS           float64  `json:"ops_per_s"`
	IntendedPerS      *float64 `json:"intended_per_s"`
	PctIntended       *float64 `json:"pct_intended"`
	P50us             *float64 `json:"p50_us"`
	P99us             *float64 `json:"p99_us"`
	P999us            *float64 `json:"p999_us"`
	ClientCPUs        float64  `json:"client_cpu_s"`
	ServerCPUs        float64  `json:"server_cpu_s"`
	// LoadAvg is the machine's one-minute load average when the point
	// ended: a figure taken on a busy machine says so.
	LoadAvg           *float64 `json:"load_avg,omitempty"`
	ClientCPUusPerOp  *float64 `json:"client_cpu_us_per_op"`
	ServerCPUusPerOp  *float64 `json:"server_cpu_us_per_op"`
	CPUusPerOp        *float64 `json:"cpu_us_per_op"`
	ClientRSSMB       float64  `json:"client_rss_mb"`
	ServerRSSMB       float64  `json:"server_rss_mb"`
	ClientWritesPerOp *float64 `json:"client_writes_per_op"`
	ServerWritesPerOp *float64 `json:"server_writes_per_op"`
	WritesPerOp       *float64 `json:"writes_per_op"`
	ClientBytesPerOp  *float64 `json:"client_bytes_per_op"`
	ServerSockWrites  *float64 `json:"server_socket_writes_per_op"`
	ServerSockBytes   *float64 `json:"server_socket_bytes_per_op"`
	ServerBytesPerOp  *float64 `json:"server_bytes_per_op"`
	AvgBatch          *float64 `json:"avg_batch"`
	AvgReplyBatch     *float64 `json:"avg_reply_batch"`
	ClientGoroutines  int64    `json:"client_goroutines_peak"`
	ServerGoroutines  int64    `json:"server_goroutines_peak"`
	Bounded           bool     `json:"bounded"`
	GOMAXPROCS        int      `json:"server_gomaxprocs"`
	Lanes             int      `json:"lanes"`
	Netns             bool     `json:"netns"`

	// Repeat is the run's round, 0 to Repeats-1; on an aggregate, the
	// round of the run that stands for the others.
	Repeat  int `json:"repeat"`
	Repeats int `json:"repeats"`
	// Aggregate marks the line that sums up a path's Repeats runs of the
	// point; never set when Repeats is 1.
	Aggregate bool `json:"aggregate,omitempty"`
	// OpsPerSMin and OpsPerSMax are the lowest and highest ops/s of the
	// runs, OpsPerSRuns each round's, in round order (aggregates only).
	OpsPerSMin  *float64  `json:"ops_per_s_min,omitempty"`
	OpsPerSMax  *float64  `json:"ops_per_s_max,omitempty"`
	OpsPerSRuns []float64 `json:"ops_per_s_runs,omitempty"`
	// ClientCPUusPerOpMin and ClientCPUusPerOpMax are the spread of the
	// runs' client CPU per operation (aggregates only).
	ClientCPUusPerOpMin *float64 `json:"client_cpu_us_per_op_min,omitempty"`
	ClientCPUusPerOpMax *float64 `json:"client_cpu_us_per_op_max,omitempty"`
	// ClientPid is the process that drove the load: the path's client
	// process.
	ClientPid int `json:"client_pid"`
}

func ptr(v float64) *float64 { return &v }

// perOp is v / ops, or null when v is unknown (< 0) or there were no ops.
func perOp(v float64, ops int64) *float64 {
	if v < 0 || ops <= 0 {
		return nil
	}
	return ptr(v / float64(ops))
}

// newResult is run round of repeats of point pt over path.
func newResult(pt Point, path string, m measurement, env *runEnv, round, repeats int) Result {
	r := Result{
		Time: time.Now().UTC().Format(time.RFC3339), Repeat: round, Repeats: repeats, Op: pt.Op, Path: path, Payload: pt.Payload,
		PayloadBytes: payloads[pt.Payload].size, Writers: pt.Writers, PaceMS: pt.PaceMS,
		MessagesPerWriter: pt.Messages, TargetOps: int64(pt.Writers * pt.Messages),
		Ops: m.ops, Errors: m.errs, ElapsedS: m.elapsed.Seconds(), Bounded: m.bounded,
		ClientCPUs: m.client.CPU.Seconds(), ServerCPUs: time.Duration(m.server.CPUNanos).Seconds(),
		ClientRSSMB: float64(m.clientRSS) / (1 << 20), ServerRSSMB: float64(m.server.PeakRSS) / (1 << 20),
		ClientGoroutines: m.clientG, ServerGoroutines: m.server.PeakGoroutines,
		GOMAXPROCS: env.info.GOMAXPROCS, Netns: env.cfg.Netns, ClientPid: m.clientPid,
	}
	if m.firstErr != nil {
		r.FirstError = m.firstErr.Error()
	}
	if m.elapsed > 0 {
		r.OpsPerS = float64(m.ops) / m.elapsed.Seconds()
	}
	if pt.PaceMS > 0 {
		r.IntendedPerS = ptr(float64(pt.Writers) * 1000 / float64(pt.PaceMS))
		r.PctIntended = ptr(100 * r.OpsPerS / *r.IntendedPerS)
	}
	if len(m.lat) == 3 {
		us := func(d time.Duration) *float64 { return ptr(float64(d) / 1e3) }
		r.P50us, r.P99us, r.P999us = us(m.lat[0]), us(m.lat[1]), us(m.lat[2])
	}
	if l := loadAvg(); l >= 0 {
		r.LoadAvg = ptr(l)
	}
	r.ClientCPUusPerOp = perOp(r.ClientCPUs*1e6, m.ops)
	r.ServerCPUusPerOp = perOp(r.ServerCPUs*1e6, m.ops)
	r.CPUusPerOp = perOp((r.ClientCPUs+r.ServerCPUs)*1e6, m.ops)
	r.ClientWritesPerOp = perOp(float64(m.client.Writes), m.ops)
	r.ServerWritesPerOp = perOp(float64(m.server.Writes), m.ops)
	if r.ClientWritesPerOp != nil && r.ServerWritesPerOp != nil {
		r.WritesPerOp = ptr(*r.ClientWritesPerOp + *r.ServerWritesPerOp)
	}
	r.ClientBytesPerOp = perOp(float64(m.client.Bytes), m.ops)
	r.ServerBytesPerOp = perOp(float64(m.server.Bytes), m.ops)
	r.ServerSockWrites = perOp(float64(m.server.SocketWrites), m.ops)
	r.ServerSockBytes = perOp(float64(m.server.SocketBytes), m.ops)
	if batchTransport(path) {
		// The lanes the client had opened by the end of the point (they
		// follow the load, up to the server's pool).
		r.Lanes = m.lanes
		if m.server.Frames > 0 {
			r.AvgBatch = ptr(float64(m.server.Entries) / float64(m.server.Frames))
		}
		if m.server.ReplyFrames > 0 && replied(pt.Op) {
			r.AvgReplyBatch = ptr(float64(m.server.Calls) / float64(m.server.ReplyFrames))
		}
	} else {
		r.Lanes = 1
	}
	return r
}

// jsonSink appends Results to a JSON lines file, one object per line.
type jsonSink struct {
	f   *os.File
	enc *json.Encoder
}

func openJSON(path string) (*jsonSink, error) {
	if path == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results folder: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("results file: %w", err)
	}
	return &jsonSink{f: f, enc: json.NewEncoder(f)}, nil
}

func (s *jsonSink) write(r Result) error {
	if s == nil {
		return nil
	}
	if err := s.enc.Encode(r); err != nil {
		return fmt.Errorf("write %s: %w", s.f.Name(), err)
	}
	return nil
}

func (s *jsonSink) close() error {
	if s == nil {
		return nil
	}
	return s.f.Close()
}

// The stdout table: one row per point, the paths side by side. Per path:
// ops/s, p99 latency, client CPU µs per op and client + server CPU µs per
// op; the ratios batch ÷ plain (the direct Client against rpcx's),
// dropin ÷ plainx (each XClient) and dropin ÷ batch (what the drop-in
// keeps of the direct Client); write syscalls per op of plain and batch,
// and the batch path's entries per frame. "n/a": the path has no such
// operation (an XClient has no send); "-": not measured in this run.
type tableCol struct {
	group, head string
	// path is the path a per-path column shows ("" for the others).
	path  string
	width int
	cell  func(got map[string]Result) string
}

// perPath is a column per path of what v takes from its result.
func perPath(group string, width int, paths []string, v func(Result) string) []tableCol {
	var cols []tableCol
	for _, path := range paths {
		cols = append(cols, tableCol{group, path, path, width, func(got map[string]Result) string {
			r, ok := got[path]
			if !ok {
				return "-"
			}
			return v(r)
		}})
	}
	return cols
}

// ratioCol is num's ops/s over den's.
func ratioCol(num, den string) tableCol {
	return tableCol{"ratio", num[:1] + "÷" + den, "", 8, func(got map[string]Result) string {
		n, okn := got[num]
		d, okd := got[den]
		if !okn || !okd || d.OpsPerS <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", n.OpsPerS/d.OpsPerS)
	}}
}

var tableCols = func() []tableCol {
	var cols []tableCol
	cols = append(cols, perPath("ops/s", 9, allPaths, func(r Result) string { return fmt.Sprintf("%.0f", r.OpsPerS) })...)
	cols = append(cols, ratioCol(pathBatch, pathPlain), ratioCol(pathDropin, pathPlainX), ratioCol(pathDropin, pathBatch))
	cols = append(cols, perPath("p99 µs", 6, allPaths, func(r Result) string { return fmtOpt(r.P99us, 0) })...)
	cols = append(cols, perPath("client cpu µs/op", 6, allPaths, func(r Result) string { return fmtOpt(r.ClientCPUusPerOp, 1) })...)
	cols = append(cols, perPath("cpu µs/op", 6, allPaths, func(r Result) string { return fmtOpt(r.CPUusPerOp, 1) })...)
	cols = append(cols, perPath("wr/op", 6, []string{pathPlain, pathBatch}, func(r Result) string { return fmtOpt(r.WritesPerOp, 3) })...)
	cols = append(cols, perPath("avg", 6, []string{pathBatch}, func(r Result) string { return fmtOpt(r.AvgBatch, 1) })...)
	return cols
}()

// tableHeader prints the table's two header lines: the column groups and
// the paths; with repeats > 1, a line before them says the cells are
// medians.
func tableHeader(w io.Writer, repeats int) {
	if t := repeatText(repeats); t != "" {
		fmt.Fprintln(w, t+":")
	}
	var top, sub strings.Builder
	fmt.Fprintf(&top, "%-4s %-13s %7s %5s", "op", "payload", "writers", "pace")
	fmt.Fprintf(&sub, "%-4s %-13s %7s %5s", "", "", "", "ms")
	last := ""
	for _, c := range tableCols {
		label := ""
		if c.group != last {
			label = c.group
			top.WriteString(" |")
			sub.WriteString(" |")
			last = c.group
		}
		fmt.Fprintf(&top, " %-*s", c.width, label)
		fmt.Fprintf(&sub, " %*s", c.width, c.head)
	}
	fmt.Fprintln(w, strings.TrimRight(top.String(), " ")+" | notes")
	fmt.Fprintln(w, sub.String())
}

// tableRow prints point pt's row from its results by path.
func tableRow(w io.Writer, pt Point, got map[string]Result) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s %-13s %7d %5d", pt.Op, pt.Payload, pt.Writers, pt.PaceMS)
	last := ""
	for _, c := range tableCols {
		if c.group != last {
			b.WriteString(" |")
			last = c.group
		}
		v := c.cell(got)
		if v == "-" && c.path != "" && !offers(c.path, pt.Op) {
			v = "n/a"
		}
		fmt.Fprintf(&b, " %*s", c.width, v)
	}
	var notes []string
	for _, path := range allPaths {
		r, ok := got[path]
		if !ok {
			continue
		}
		if r.Bounded {
			notes = append(notes, r.Path+" bounded")
		}
		if r.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s %d errors (%s)", r.Path, r.Errors, r.FirstError))
		}
		if r.PctIntended != nil {
			notes = append(notes, fmt.Sprintf("%s %.0f%% of intended", r.Path, *r.PctIntended))
		}
		if r.Lanes > 0 && batchTransport(r.Path) {
			notes = append(notes, fmt.Sprintf("%s %d lanes", r.Path, r.Lanes))
		}
	}
	notes = append(notes, roundRatioNotes(got)...)
	fmt.Fprintf(&b, " | %s", strings.Join(notes, "; "))
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
}

func fmtOpt(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, *v)
}
