package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTinySweep runs one tiny point end to end, as `go run ./perf` would:
// server process per path, all four paths, all four operations (send only
// on the plain and batch paths: an XClient has none), JSON lines, report.
func TestTinySweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	dir := t.TempDir()
	cfg, err := parseConfig([]string{"-writers", "2", "-messages", "50", "-warmup", "10",
		"-point-timeout", "10s", "-codec-duration", "50ms", "-progress=false",
		"-out", filepath.Join(dir, "r.jsonl"), "-report", filepath.Join(dir, "report")}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, cfg, &stdout, &stderr), stderr.String())

	assert.Contains(t, stdout.String(), "ratio")
	assert.Contains(t, stdout.String(), "d÷plainx")
	assert.Contains(t, stdout.String(), "d÷batch")
	assert.Regexp(t, `(?m)^send .*\bn/a\b`, stdout.String(), "the XClient paths' send cells")
	b, err := os.ReadFile(filepath.Join(dir, "r.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 14, "call, go and cast × 4 paths, send × 2")
	seen := map[string]bool{}
	for _, line := range lines {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj))
		for _, k := range []string{"op", "path", "payload", "writers", "pace_ms", "messages_per_writer", "ops",
			"elapsed_s", "ops_per_s", "intended_per_s", "p50_us", "p99_us", "p999_us", "client_cpu_s", "server_cpu_s",
			"client_rss_mb", "server_rss_mb", "writes_per_op", "avg_batch", "bounded"} {
			assert.Contains(t, obj, k)
		}
		var r Result
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		seen[r.Op+"/"+r.Path] = true
		assert.EqualValues(t, 100, r.Ops, "%s %s: every operation counted", r.Op, r.Path)
		assert.Zero(t, r.Errors, r.FirstError)
		assert.False(t, r.Bounded)
		assert.Positive(t, r.OpsPerS)
		assert.Positive(t, r.ServerRSSMB)
		if replied(r.Op) {
			require.NotNil(t, r.P99us)
			assert.Positive(t, *r.P99us)
		} else {
			assert.Nil(t, r.P99us)
		}
		if batchTransport(r.Path) {
			require.NotNil(t, r.AvgBatch, "%s %s", r.Op, r.Path)
			assert.GreaterOrEqual(t, *r.AvgBatch, 1.0)
		} else {
			assert.Nil(t, r.AvgBatch)
		}
	}
	assert.Len(t, seen, 14)
	for _, path := range allPaths {
		assert.True(t, seen["go/"+path], "go over %s", path)
		assert.True(t, seen["cast/"+path], "cast over %s", path)
	}
	assert.False(t, seen["send/"+pathDropin] || seen["send/"+pathPlainX], "an XClient has no send")
	report, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	require.NoError(t, err)
	for _, path := range allPaths {
		assert.Regexp(t, `\| call \| data \| 0 \| 2 \| `+path+` \| \d+\.\d \| \d+\.\d \| \d+ \| \d+ \|`, string(report), "%s: its resources row", path)
	}
	assert.Regexp(t, `\| send \| 2 \| - \| [\d,]+ \| n/a \| [\d,]+ \| n/a \|`, string(report), "send: n/a on the XClient paths")
	assert.Contains(t, string(report), "dropin ÷ plainx")
	for _, f := range []string{"report.md", "ceiling.json", "throughput-data-pace0.svg", "throughput-call-data-pace0.svg"} {
		_, err := os.Stat(filepath.Join(dir, "report", f))
		assert.NoError(t, err, f)
	}
}

// TestTinyPacedPoint: a paced point runs every writer's operations with
// the pause between them, and says what share of the intended rate each
// path delivered; each path's writers run in its own client process.
func TestTinyPacedPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	dir := t.TempDir()
	const writers, messages, paceMS = 3, 6, 20
	cfg, err := parseConfig([]string{"-ops", "call", "-writers", "3", "-messages", "6", "-pace", "20", "-warmup", "10",
		"-point-timeout", "10s", "-codec-duration", "10ms", "-progress=false",
		"-out", filepath.Join(dir, "r.jsonl"), "-report", ""}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, cfg, &stdout, &stderr), stderr.String())
	b, err := os.ReadFile(filepath.Join(dir, "r.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 4, "every path")
	pids := map[int]bool{}
	for _, line := range lines {
		var r Result
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		require.EqualValues(t, writers*messages, r.Ops, r.Path)
		assert.NotEqual(t, os.Getpid(), r.ClientPid, "%s: a client process of its own", r.Path)
		pids[r.ClientPid] = true
		require.NotNil(t, r.IntendedPerS, r.Path)
		assert.Equal(t, float64(writers)*1000/paceMS, *r.IntendedPerS, r.Path)
		require.NotNil(t, r.PctIntended, r.Path)
		assert.Positive(t, *r.PctIntended, r.Path)
		// Each writer pauses between its operations: the point cannot end
		// before its last writer has paused messages-1 times.
		assert.GreaterOrEqual(t, r.ElapsedS*1000, float64((messages-1)*paceMS), r.Path)
		require.NotNil(t, r.LoadAvg, r.Path)
	}
	assert.Len(t, pids, 4, "a client process per path")
	assert.Regexp(t, `(?m)^call .* 20 \|.*% of intended`, stdout.String())
}

// TestTinyRepeatSweep runs one tiny point three times over two paths, as
// `go run ./perf -repeat 3` would: every run is a JSON line with its
// round, the rounds alternate the paths' order, each path's aggregate
// follows, and the table and report say they give medians and each ratio
// per round.
func TestTinyRepeatSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	dir := t.TempDir()
	cfg, err := parseConfig([]string{"-repeat", "3", "-paths", "batch,dropin", "-ops", "call", "-writers", "10",
		"-total-ops", "300", "-warmup", "10", "-point-timeout", "10s", "-codec-duration", "20ms", "-progress=false",
		"-out", filepath.Join(dir, "r.jsonl"), "-report", filepath.Join(dir, "report")}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, cfg, &stdout, &stderr), stderr.String())

	b, err := os.ReadFile(filepath.Join(dir, "r.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 8, "3 runs and an aggregate per path")
	var order []string
	aggs := map[string]Result{}
	runs := map[string][]Result{}
	for _, line := range lines {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj))
		assert.Contains(t, obj, "repeat")
		assert.Contains(t, obj, "repeats")
		var r Result
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		assert.Equal(t, 3, r.Repeats)
		assert.EqualValues(t, 300, r.Ops, "%s round %d", r.Path, r.Repeat)
		assert.Zero(t, r.Errors, r.FirstError)
		if r.Aggregate {
			aggs[r.Path] = r
			continue
		}
		assert.NotContains(t, obj, "aggregate", "a run is not marked")
		assert.NotContains(t, obj, "ops_per_s_min")
		order = append(order, r.Path)
		assert.Equal(t, len(runs[r.Path]), r.Repeat, "%s: rounds 0, 1, 2 in order", r.Path)
		// Both batch paths report the lanes their Client had open.
		assert.Positive(t, r.Lanes, "%s round %d: lanes", r.Path, r.Repeat)
		runs[r.Path] = append(runs[r.Path], r)
	}
	assert.Equal(t, []string{"batch", "dropin", "dropin", "batch", "batch", "dropin"}, order, "the rounds alternate the order")
	// Each path ran in a client process of its own, every round of it in
	// the same one.
	for path, rs := range runs {
		for _, r := range rs {
			assert.Equal(t, rs[0].ClientPid, r.ClientPid, "%s: one client process for every round", path)
		}
		assert.NotEqual(t, os.Getpid(), rs[0].ClientPid, "%s: not the harness's process", path)
	}
	assert.NotEqual(t, runs["batch"][0].ClientPid, runs["dropin"][0].ClientPid, "a client process per path")
	require.Len(t, aggs, 2)
	for path, agg := range aggs {
		require.Len(t, runs[path], 3)
		var ops []float64
		for _, r := range runs[path] {
			ops = append(ops, r.OpsPerS)
		}
		assert.Equal(t, ops, agg.OpsPerSRuns, path)
		assert.Equal(t, *lowerMedian(ops), agg.OpsPerS, path)
		require.NotNil(t, agg.OpsPerSMin, path)
		require.NotNil(t, agg.OpsPerSMax, path)
		assert.LessOrEqual(t, *agg.OpsPerSMin, agg.OpsPerS, path)
		assert.GreaterOrEqual(t, *agg.OpsPerSMax, agg.OpsPerS, path)
		require.NotNil(t, agg.ClientCPUusPerOp, path)
	}

	out := stdout.String()
	assert.Contains(t, out, "medians of 3 interleaved runs per path")
	assert.Regexp(t, `(?m)^call .*\| .*d÷batch per round \d+\.\d\d \d+\.\d\d \d+\.\d\d`, out, "the ratio per round in the point's notes")
	report, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(report), "medians of 3 interleaved runs per path")
	assert.Regexp(t, `\| call \| 10 \| .*d÷batch per round \d+\.\d\d \d+\.\d\d \d+\.\d\d \|`, string(report))
	for _, path := range []string{"batch", "dropin"} {
		assert.Equal(t, 1, strings.Count(string(report), "| call | data | 0 | 10 | "+path+" |"), "%s: one resources row, the aggregate's", path)
	}
}
