package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/etcdtest"
)

// The tests drive rpcxbench end to end against demoserver, a separate
// program (./demoserver) whose types rpcxbench does not know, built once
// by TestMain and started per test: with and without the rpcxbatch
// plugin, reached through a static address or through etcd. Each load is
// a few hundred milliseconds: the tests check what the tool reports, not
// how fast anything is.

// demoBin is the demo server binary TestMain built.
var demoBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rpcxbench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	demoBin = filepath.Join(dir, "demoserver")
	out, err := exec.Command(goTool(), "build", "-o", demoBin, "./demoserver").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building ./demoserver: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if etcdSrv != nil {
		etcdSrv.Stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool is the go command: on PATH, else the one of the GOROOT the test
// was built with.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// startDemo starts the demo server on a free loopback port, with the
// plugin when plugin is set, registered in etcd under base when endpoint
// is not "". It returns the server's address; the test's cleanup stops
// it (its stdin closes; a kill after five seconds).
func startDemo(t *testing.T, plugin bool, endpoint, base string) string {
	t.Helper()
	args := []string{"-addr", "127.0.0.1:0", fmt.Sprintf("-plugin=%v", plugin)}
	if endpoint != "" {
		args = append(args, "-etcd", endpoint, "-base-path", base)
	}
	cmd := exec.Command(demoBin, args...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { // the reaper: ends when the process does
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan string, 1)
	go func() { // ends at the READY line or when stdout closes
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
		require.True(t, ok, "demoserver said %q; stderr: %s", line, stderr.String())
		return addr
	case <-time.After(15 * time.Second):
		t.Fatalf("demoserver not ready after 15s; stderr: %s", stderr.String())
	}
	return ""
}

// syncBuffer is a bytes.Buffer a process's output is copied into while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tool runs rpcxbench's command line and returns its stdout, stderr and
// exit status.
func tool(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = cli(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

// quick are the load flags of the tests' runs: two concurrencies, two
// rounds, a few hundred milliseconds per path each.
var quick = []string{"-c", "1,4", "-d", "300ms", "-rounds", "2", "-warmup", "20ms", "-progress=false"}

// readLines reads a JSON lines file.
func readLines(t *testing.T, file string) []line {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []line
	for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(s), &obj), s)
		for _, k := range []string{"concurrency", "path", "calls", "errors", "errors_by_kind", "calls_per_s", "calls_per_s_rounds",
			"p50_us", "p99_us", "p999_us", "client_cpu_us_per_call", "plugin", "servers"} {
			assert.Contains(t, obj, k)
		}
		var l line
		require.NoError(t, json.Unmarshal([]byte(s), &l))
		out = append(out, l)
	}
	return out
}

// TestStaticServerWithAndWithoutPlugin: the same struct-argument call
// against a server with the plugin and one without, over a static
// address. Both give the table (a row per concurrency), a JSON line per
// concurrency and path, and the figure; the server without the plugin is
// reported as such, and the drop-in's figures as plain rpcx's.
func TestStaticServerWithAndWithoutPlugin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plugin bool
		figure string
	}{{"plugin", true, "f.svg"}, {"plain", false, "f.png"}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startDemo(t, tc.plugin, "", "")
			dir := t.TempDir()
			jl, fig := filepath.Join(dir, "r.jsonl"), filepath.Join(dir, tc.figure)
			out, errs, code := tool(t, append([]string{"-addr", addr, "-call", "Shop.Order",
				"-args", `{"Item": "tea", "Qty": 3, "Price": 2.5, "Tags": ["green", "loose"]}`, "-json", jl, "-figure", fig}, quick...)...)
			require.Zero(t, code, "stderr: %s\nstdout: %s", errs, out)
			t.Logf("rpcxbench's table:\n%s", out)

			// The first call's reply, decoded without the service's types.
			assert.Contains(t, out, `reply to the first call: {"Item":"tea","Tags":2,"Total":7.5}`)
			assert.Regexp(t, `(?m)^ +1 \| +[\d,]+ +[\d,]+ +\d+\.\d\d× \|`, out, "the row of concurrency 1")
			assert.Regexp(t, `(?m)^ +4 \| +[\d,]+ +[\d,]+ +\d+\.\d\d× \|.*\| 0, 0`, out, "the row of concurrency 4, no errors")
			if tc.plugin {
				assert.Contains(t, out, addr+"  rpcxbatch plugin: the drop-in calls it over")
				assert.NotContains(t, out, "no plugin")
			} else {
				assert.Contains(t, out, addr+"  no rpcxbatch plugin: the drop-in falls back to plain rpcx there")
				assert.Regexp(t, `(?m)^ +4 \|.*\(no plugin: the drop-in ran over plain rpcx\)$`, out)
				assert.Contains(t, out, "no server has the rpcxbatch plugin: the drop-in ran over plain rpcx")
			}
			assert.Equal(t, "JSON lines: "+jl+"\nfigure: "+fig+"\n", errs, "where the files are; no progress lines, no errors")

			lines := readLines(t, jl)
			require.Len(t, lines, 4, "2 concurrencies × 2 paths")
			for i, l := range lines {
				assert.Equal(t, []int{1, 1, 4, 4}[i], l.Concurrency)
				assert.Equal(t, paths[i%2], l.Path)
				assert.Equal(t, "Shop", l.Service)
				assert.Equal(t, "Order", l.Method)
				assert.Positive(t, l.Calls, "%s c=%d", l.Path, l.Concurrency)
				assert.Zero(t, l.Errors, "%s c=%d: %v", l.Path, l.Concurrency, l.ErrorsBy)
				assert.Len(t, l.RoundsPerS, 2, "a rate per round")
				require.NotNil(t, l.P50us)
				assert.Positive(t, *l.P50us)
				assert.LessOrEqual(t, *l.P50us, *l.P99us)
				assert.LessOrEqual(t, *l.P99us, *l.P999us)
				require.NotNil(t, l.CPUusPerOp)
				assert.Positive(t, *l.CPUusPerOp)
				require.Len(t, l.Servers, 1)
				assert.Equal(t, addr, l.Servers[0].Addr)
				if tc.plugin {
					assert.Equal(t, "yes", l.Plugin)
					assert.Positive(t, l.Servers[0].Lanes, "the drop-in's lanes")
				} else {
					assert.Equal(t, "no", l.Plugin)
					assert.Zero(t, l.Servers[0].Lanes)
				}
				if l.Path == pathDropin {
					require.NotNil(t, l.Ratio)
					assert.InEpsilon(t, l.CallsPerS/lines[i-1].CallsPerS, *l.Ratio, 1e-9)
				} else {
					assert.Nil(t, l.Ratio)
				}
			}
			b, err := os.ReadFile(fig)
			require.NoError(t, err)
			if tc.figure == "f.png" {
				assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG")), "a PNG")
			} else {
				assert.Contains(t, string(b), "<svg")
				assert.Contains(t, string(b), "calls per second")
				assert.Contains(t, string(b), "rpcxbatch drop-in XClient")
			}
		})
	}
}

// TestBytesSlowAndFailingMethods: a []byte argument (a JSON string with
// msgpack, the -args bytes as they are with -serialize none), a slow
// method whose latency the table shows, counted calls (-n), and a method
// that fails every third call, whose errors are counted by kind.
func TestBytesSlowAndFailingMethods(t *testing.T) {
	addr := startDemo(t, true, "", "")
	dir := t.TempDir()

	// With progress on (every 50 ms here, every second by default), a
	// line per run and tick on stderr.
	progressEvery = 50 * time.Millisecond
	t.Cleanup(func() { progressEvery = time.Second })
	out, errs, code := tool(t, "-addr", addr, "-call", "Blob.Echo", "-args", `"hello, bytes"`, "-c", "2", "-d", "400ms", "-warmup", "0")
	require.Zero(t, code, errs)
	assert.Contains(t, out, `reply to the first call: "hello, bytes"`)
	assert.Regexp(t, `(?m)^  c=2 round 1/2 rpcx XClient: [\d,]+ calls \([\d.]+m?s of 200ms\)$`, errs, "progress of the first round")
	assert.Regexp(t, `(?m)^  c=2 round 2/2 drop-in: [\d,]+ calls \([\d.]+m?s of 200ms\)$`, errs, "progress of the second round")

	out, errs, code = tool(t, "-addr", addr, "-call", "Blob.Echo", "-serialize", "none", "-args", "raw \x00 bytes", "-c", "2", "-d", "200ms", "-warmup", "0", "-progress=false")
	require.Zero(t, code, errs)
	assert.Contains(t, out, `reply to the first call: 11 bytes "raw \x00 bytes"`)
	assert.Contains(t, out, "none arguments")

	jl := filepath.Join(dir, "slow.jsonl")
	out, errs, code = tool(t, "-addr", addr, "-call", "Shop.Slow", "-args", `{"MS": 30}`, "-c", "2", "-n", "8", "-rounds", "2", "-warmup", "0", "-json", jl, "-progress=false")
	require.Zero(t, code, errs)
	t.Logf("the slow method:\n%s", out)
	for _, l := range readLines(t, jl) {
		assert.EqualValues(t, 8, l.Calls, "%s: -n 8 calls", l.Path)
		require.NotNil(t, l.P50us)
		assert.GreaterOrEqual(t, *l.P50us, 29e3, "%s: a call takes the 30 ms the service waits", l.Path)
	}

	jl = filepath.Join(dir, "flaky.jsonl")
	out, errs, code = tool(t, "-addr", addr, "-call", "Shop.Flaky", "-args", `{"Item": "tea", "Qty": 1}`, "-c", "2", "-n", "30", "-rounds", "1", "-warmup", "0", "-json", jl, "-progress=false")
	require.Zero(t, code, "errors of the service do not end the run: %s", errs)
	t.Logf("the failing method:\n%s", out)
	assert.Contains(t, out, "errors by kind (the first of each):")
	assert.Regexp(t, `(?m)^  c=2 rpcx XClient: \d+ service \(flaky: call \d+ fails, as every third does\)$`, out)
	assert.Regexp(t, `(?m)^  c=2 drop-in: \d+ service \(flaky: call \d+ fails, as every third does\)$`, out)
	for _, l := range readLines(t, jl) {
		require.Contains(t, l.ErrorsBy, "service", l.Path)
		assert.Equal(t, l.Errors, l.ErrorsBy["service"].N, l.Path)
		assert.EqualValues(t, 30, l.Calls+l.Errors, "%s: -n counts the calls that failed too", l.Path)
		assert.InDelta(t, 10, l.Errors, 2, "%s: a third of the calls fail", l.Path)
	}
}

// TestOneLineErrors: what the user gets wrong, and a server that is
// down, end the run with one line on stderr and a non-zero status.
func TestOneLineErrors(t *testing.T) {
	addr := startDemo(t, true, "", "")
	plain := startDemo(t, false, "", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	ln.Close() // nothing listens there now

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown method", []string{"-addr", addr, "-call", "Shop.Refund"}, 1, `rpcxbench: no such method: service Shop has no method "Refund"`},
		{"unknown method, plain server", []string{"-addr", plain, "-call", "Shop.Refund"}, 1, `rpcxbench: no such method: service Shop has no method "Refund"`},
		{"unknown service", []string{"-addr", addr, "-call", "Till.Order"}, 1, `rpcxbench: no such service: the server has no service "Till"`},
		{"bad JSON", []string{"-addr", addr, "-call", "Shop.Order", "-args", `{"Item": "tea", "Qty": }`}, 2, "rpcxbench: -args is not JSON: invalid character '}' looking for beginning of value at byte 24"},
		{"arguments the service rejects", []string{"-addr", addr, "-call", "Shop.Order", "-args", `["tea", 3]`}, 1, "rpcxbench: the service answered with an error: Shop.Order over the rpcx XClient: msgpack:"},
		{"server down", []string{"-addr", down, "-call", "Shop.Order"}, 1, "rpcxbench: cannot reach the server: dial tcp " + down},
		{"no call", []string{"-addr", addr}, 2, `rpcxbench: -call "": want Service.Method`},
		{"unknown flag", []string{"-addr", addr, "-call", "Shop.Order", "-conc", "5"}, 2, "rpcxbench: flag provided but not defined: -conc (rpcxbench -h lists the flags)"},
		{"protobuf", []string{"-addr", addr, "-call", "Shop.Order", "-serialize", "protobuf"}, 2, `rpcxbench: -serialize "protobuf": msgpack, json or none`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := tool(t, append(tc.args, quick...)...)
			assert.Equal(t, tc.code, code)
			assert.Empty(t, out, "nothing on stdout")
			assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
			assert.True(t, strings.HasPrefix(errs, tc.want), "got %q\nwant it to start with %q", errs, tc.want)
			t.Logf("%s", errs)
		})
	}
}

var (
	etcdOnce sync.Once
	etcdSrv  *etcdtest.Etcd
	etcdErr  error
)

// needEtcd is registry/'s: the package's throwaway etcd, started on first
// use; without an etcd binary the test is skipped, saying so, unless
// CI=true, where it fails.
func needEtcd(t *testing.T) *etcdtest.Etcd {
	t.Helper()
	etcdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		etcdSrv, etcdErr = etcdtest.Start(ctx)
	})
	switch {
	case etcdErr == nil:
		return etcdSrv
	case errors.Is(etcdErr, etcdtest.ErrNotInstalled) && os.Getenv("CI") == "true":
		t.Fatalf("etcd-server must be installed for CI (%s): %v", etcdtest.InstallHint, etcdErr)
	case errors.Is(etcdErr, etcdtest.ErrNotInstalled):
		t.Skip("etcd not installed: " + etcdtest.InstallHint + "; the etcd discovery test did not run")
	default:
		t.Fatalf("throwaway etcd did not start: %v", etcdErr)
	}
	return nil
}

// awaitRegistered waits until etcd lists a server of service under base
// (the demo server writes its keys before it reports ready: this checks
// that it did).
func awaitRegistered(t *testing.T, e *etcdtest.Etcd, base, service string) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.Get(ctx, base+"/"+service+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server of %s under %s in etcd after 10s (last error: %v)", service, base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEtcdDiscovery: the servers come from etcd under a base path, as
// rpcx-etcd's discovery gives them; a server registered without the
// plugin (plugin.Advertise's rpcxbatch=0) is reported as such, and a base
// path with no server is one line.
func TestEtcdDiscovery(t *testing.T) {
	e := needEtcd(t)
	for _, tc := range []struct {
		name   string
		plugin bool
		want   string
	}{
		{"plugin", true, "rpcxbatch plugin: the drop-in calls it over"},
		{"plain", false, "registered without the rpcxbatch plugin (rpcxbatch=0): the drop-in calls it over plain rpcx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := "/rpcxbench_test/" + tc.name
			addr := startDemo(t, tc.plugin, e.Endpoint, base)
			awaitRegistered(t, e, base, "Shop")
			jl := filepath.Join(t.TempDir(), "r.jsonl")
			out, errs, code := tool(t, append([]string{"-etcd", e.Endpoint, "-base-path", base, "-call", "Shop.Order",
				"-args", `{"Item": "tea", "Qty": 2, "Price": 1}`, "-json", jl}, quick...)...)
			require.Zero(t, code, "stderr: %s\nstdout: %s", errs, out)
			t.Logf("rpcxbench's table:\n%s", out)
			assert.Contains(t, out, "servers (etcd at "+e.Endpoint+", base path "+base+"):")
			assert.Contains(t, out, addr+"  "+tc.want)
			lines := readLines(t, jl)
			require.Len(t, lines, 4)
			for _, l := range lines {
				assert.Positive(t, l.Calls)
				assert.Zero(t, l.Errors, "%v", l.ErrorsBy)
				assert.Equal(t, map[bool]string{true: "yes", false: "no"}[tc.plugin], l.Plugin)
				assert.Contains(t, l.Discovery, "etcd at")
			}
		})
	}
	t.Run("no server", func(t *testing.T) {
		out, errs, code := tool(t, append([]string{"-etcd", e.Endpoint, "-base-path", "/rpcxbench_test/empty", "-call", "Shop.Order"}, quick...)...)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Equal(t, "rpcxbench: no server of Shop under /rpcxbench_test/empty/Shop in etcd at "+e.Endpoint+"\n", errs)
	})
}
