package etcdtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// InstallHint is how to get the etcd binary on Debian and Ubuntu.
const InstallHint = "apt-get install -y etcd-server"

// ErrNotInstalled is returned by Start when there is no etcd binary on PATH.
var ErrNotInstalled = errors.New("etcd not installed (" + InstallHint + ")")

// startTimeout bounds the wait for a fresh etcd to report healthy; one
// starts in about a second here.
const startTimeout = 15 * time.Second

// stopTimeout bounds the wait for etcd to exit after SIGTERM before it is
// killed.
const stopTimeout = 5 * time.Second

// Etcd is a running throwaway etcd. Stop it when done: it owns a child
// process and a data directory.
type Etcd struct {
	// Endpoint is the client address, "127.0.0.1:PORT", in the form rpcx's
	// etcd plugins take in EtcdServers.
	Endpoint string

	cmd    *exec.Cmd
	dir    string
	exited chan struct{} // closed when the process has exited
	log    *tail
	once   sync.Once
}

// Path returns the path of the etcd binary, or ErrNotInstalled.
func Path() (string, error) {
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	return p, nil
}

// Start starts etcd on free loopback ports and waits until it reports
// healthy, ctx ends, or startTimeout passes. A port taken between picking
// and binding makes etcd exit at once; Start then tries again with other
// ports, three times in all.
func Start(ctx context.Context) (*Etcd, error) {
	bin, err := Path()
	if err != nil {
		return nil, err
	}
	var last error
	for range 3 {
		e, err := start(ctx, bin)
		if err == nil {
			return e, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func start(ctx context.Context, bin string) (*Etcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rpcxbatch-etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: data directory: %w", err)
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cmd := exec.Command(bin,
		"--name", "default",
		"--data-dir", dir,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "default="+peer,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "rpcxbatch-"+strconv.Itoa(ports[0]),
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	)
	lg := &tail{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcdtest: start %s: %w", bin, err)
	}
	e := &Etcd{Endpoint: "127.0.0.1:" + strconv.Itoa(ports[0]), cmd: cmd, dir: dir,
		exited: make(chan struct{}), log: lg}
	go func() {
		// The owner of the process: reaps it; Stop waits for it.
		cmd.Wait()
		close(e.exited)
	}()
	if err := e.waitHealthy(ctx, client); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// waitHealthy polls etcd's /health until it answers true.
func (e *Etcd) waitHealthy(ctx context.Context, clientURL string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if healthy(ctx, hc, clientURL) {
			return nil
		}
		select {
		case <-e.exited:
			return fmt.Errorf("etcdtest: etcd exited at start (%v); its log:\n%s", e.cmd.ProcessState, e.log)
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: etcd not healthy: %w; its log:\n%s", ctx.Err(), e.log)
		case <-tick.C:
		}
	}
}

func healthy(ctx context.Context, hc *http.Client, clientURL string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

// Stop terminates etcd (SIGTERM, then SIGKILL after stopTimeout), waits
// for it to exit and removes its data directory. It is idempotent.
func (e *Etcd) Stop() {
	e.once.Do(func() {
		e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(stopTimeout):
			e.cmd.Process.Kill()
			<-e.exited
		}
		os.RemoveAll(e.dir)
	})
}

// Log returns the last lines etcd wrote (warnings and errors only).
func (e *Etcd) Log() string { return e.log.String() }

// freePorts returns n loopback ports that were free a moment ago. They are
// held open together so that the n are distinct.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail keeps the last max bytes written to it; etcd's log goes there so
// that a failure to start can show why without flooding a passing run.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
