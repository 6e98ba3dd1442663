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
// server process, both paths, all three operations, JSON lines, report.
func TestTinySweep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	dir := t.TempDir()
	cfg, err := parseConfig([]string{"-writers", "2", "-messages", "50", "-warmup", "10",
		"-point-timeout", "10s", "-codec-duration", "50ms", "-progress=false", "-after-load", "100ms",
		"-out", filepath.Join(dir, "r.jsonl"), "-report", filepath.Join(dir, "report")}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, cfg, &stdout, &stderr), stderr.String())

	assert.Contains(t, stdout.String(), "ratio")
	assert.Contains(t, stdout.String(), "after the load")
	b, err := os.ReadFile(filepath.Join(dir, "r.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 6, "3 ops × 2 paths")
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
		if r.Op == "call" {
			require.NotNil(t, r.P99us)
			assert.Positive(t, *r.P99us)
		} else {
			assert.Nil(t, r.P99us)
		}
		if r.Path == pathBatch {
			require.NotNil(t, r.AvgBatch, "%s batch", r.Op)
			assert.GreaterOrEqual(t, *r.AvgBatch, 1.0)
		} else {
			assert.Nil(t, r.AvgBatch)
		}
	}
	assert.Len(t, seen, 6)
	report, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	require.NoError(t, err)
	assert.Regexp(t, `\| server \| \d+ \| \d+ \| \d+ \| \d`, string(report), "the memory after the load, with figures")
	for _, f := range []string{"report.md", "ceiling.json", "throughput-data-pace0.svg", "throughput-call-data-pace0.svg"} {
		_, err := os.Stat(filepath.Join(dir, "report", f))
		assert.NoError(t, err, f)
	}
}
