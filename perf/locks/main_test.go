package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/etcdtest"
)

// TestMain lets the test binary be the node process too: the end-to-end
// test re-executes it with roleEnv set, as the harness does with its own
// binary.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == roleNode {
		nt, _ := time.ParseDuration(os.Getenv(timeoutEnv))
		if err := runNode(os.Stdin, os.Stdout, os.Getenv(transportEnv), nt); err != nil {
			fmt.Fprintln(os.Stderr, "locks node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTinyRun runs every design on every engine end to end, as `go run
// ./perf/locks` would, with a few clients: two node processes per point,
// JSON results, report and figure. etcd's point runs when the etcd binary
// is installed.
func TestTinyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	dir := t.TempDir()
	etcd := ""
	if _, err := etcdtest.Path(); err == nil {
		etcd = "4"
	}
	cfg, err := parseConfig([]string{"-clients", "20", "-txns1", "5", "-txns3", "2", "-txns4", "30",
		"-etcd-clients", etcd, "-etcd-locks", "40", "-pool", "1000", "-point-timeout", "30s",
		"-out", filepath.Join(dir, "r.json"), "-report", filepath.Join(dir, "report")})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, cfg))

	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := map[string]int64{ // locks every point must have taken
		"1/" + engineBatch: 2 * 20 * 5, "1/" + enginePlain: 2 * 20 * 5,
		"3/" + engineBatch: 2 * 20 * 2 * 10, "3/" + enginePlain: 2 * 20 * 2 * 10,
		"4/" + engineLocal:  2 * 20 * 30 * 10,
		"1/" + engineInproc: 2 * 20 * 5,
	}
	if etcd != "" {
		want["1/"+engineEtcd] = 2 * 4 * 5
	}
	require.Len(t, lines, len(want))
	for _, line := range lines {
		var r Result
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		k := fmt.Sprintf("%d/%s", r.Design, r.Engine)
		require.Contains(t, want, k)
		assert.Equal(t, want[k], r.Locks, "%s: every lock counted", k)
		assert.Zero(t, r.Errors, "%s: %s", k, r.FirstError)
		assert.False(t, r.Bounded, k)
		assert.Positive(t, r.LocksPerS, k)
		if r.Engine == engineInproc {
			// Both nodes in one process: one CPU time, said so.
			assert.Len(t, r.NodeCPUs, 1, k)
			assert.Equal(t, inprocNote, r.Note, k)
		} else {
			assert.Len(t, r.NodeCPUs, 2, k)
			assert.Empty(t, r.Note, k)
		}
		delete(want, k)
	}
	for _, f := range []string{"report.md", "locks.svg"} {
		_, err := os.Stat(filepath.Join(dir, "report", f))
		assert.NoError(t, err, f)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "design 1: rpcxbatch")
	assert.Contains(t, string(md), "| in-process, no transport (bound) |")
	assert.Contains(t, string(md), "design 1 bound: with today's lock layer no transport can beat plain rpcx by more than")
}

func TestConfigPresets(t *testing.T) {
	c, err := parseConfig(nil)
	require.NoError(t, err)
	assert.Equal(t, 10000, c.Clients)
	assert.Equal(t, []int{1, 3, 4}, c.Designs)
	assert.Equal(t, []int{100, 1000}, c.EtcdClients)
	assert.Equal(t, "perf/results/locks-full.json", c.Out)

	c, err = parseConfig([]string{"-preset", "quick", "-clients", "7"})
	require.NoError(t, err)
	assert.Equal(t, 7, c.Clients, "a flag given beats the preset")
	assert.Equal(t, []int{100}, c.EtcdClients)
	assert.Equal(t, "perf/results/locks-quick", c.Report)

	for _, bad := range [][]string{{"-designs", "2"}, {"-preset", "huge"}, {"-clients", "0"}, {"-etcd-clients", "x"}} {
		_, err := parseConfig(bad)
		assert.Error(t, err, "%v", bad)
	}
	c, err = parseConfig([]string{"-etcd-clients", ""})
	require.NoError(t, err)
	assert.Empty(t, c.EtcdClients)
}
