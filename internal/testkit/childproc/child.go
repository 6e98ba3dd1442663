package childproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	envChild = "RPCXBATCH_CHILD"
	envAddr  = "RPCXBATCH_CHILD_ADDR"
	envPlain = "RPCXBATCH_CHILD_PLAIN"
	envPool  = "RPCXBATCH_CHILD_POOL"
	envGuard = "RPCXBATCH_CHILD_DEPTHGUARD"
)

// Options shape a child server: Plain serves without the batch plugin (a
// plain rpcx server, for side-by-side tests), PoolSize is the lane pool
// the plugin announces (0: its default, GOMAXPROCS).
type Options struct {
	Plain    bool
	PoolSize int
	// DepthGuard adds batchserver.DepthGuard to the child's plugins.
	DepthGuard bool
}

// RunIfChild serves as a child server and exits when this process was
// started by Start; otherwise it returns at once.
func RunIfChild() {
	if os.Getenv(envChild) == "1" {
		os.Exit(serve(os.Getenv(envAddr)))
	}
}

// Child is a server running in a child process. It is killed in the
// test's Cleanup, pass or fail.
type Child struct {
	t        testing.TB
	cmd      *exec.Cmd
	addr     string
	inc      uint64
	stdin    *os.File // closing it makes the child exit
	exited   chan struct{}
	stderr   *tail
	stopped  atomic.Bool
	killOnce sync.Once
}

// Addr is the child's listening address.
func (c *Child) Addr() string { return c.addr }

// Incarnation is the incarnation the child's batch plugin drew.
func (c *Child) Incarnation() uint64 { return c.inc }

// Exited is closed once the child process has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Stderr is the last of what the child wrote to its standard error.
func (c *Child) Stderr() string { return c.stderr.String() }

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Start starts a child server at addr ("127.0.0.1:0" for a free port),
// retrying for a while when the address cannot be bound yet (a restart at
// the same port).
func Start(t testing.TB, addr string) *Child {
	t.Helper()
	return StartWith(t, addr, Options{})
}

// StartWith is Start for a child shaped by opts.
func StartWith(t testing.TB, addr string, opts Options) *Child {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		ch, err := try(t, addr, opts)
		if err == nil {
			return ch
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("child server at %s did not start: %v", addr, lastErr)
	return nil
}

func try(t testing.TB, addr string, opts Options) (*Child, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	out := &lines{ch: make(chan string, 16)}
	c := &Child{t: t, stdin: inW, exited: make(chan struct{}), stderr: &tail{}}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), envChild+"=1", envAddr+"="+addr, envPool+"="+strconv.Itoa(opts.PoolSize))
	if opts.Plain {
		c.cmd.Env = append(c.cmd.Env, envPlain+"=1")
	}
	if opts.DepthGuard {
		c.cmd.Env = append(c.cmd.Env, envGuard+"=1")
	}
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = inR, out, c.stderr
	if err := c.cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	inR.Close()
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("stderr of child %s (pid %d):\n%s", c.addr, c.cmd.Process.Pid, c.stderr)
		}
	})
	timeout := time.After(15 * time.Second)
	for {
		select {
		case line := <-out.ch:
			switch {
			case strings.HasPrefix(line, "ADDR "):
				c.addr = strings.TrimPrefix(line, "ADDR ")
			case strings.HasPrefix(line, "INC "):
				if c.inc, err = strconv.ParseUint(strings.TrimPrefix(line, "INC "), 10, 64); err != nil {
					return nil, err
				}
			case line == "READY":
				return c, nil
			}
		case <-c.exited:
			return nil, fmt.Errorf("child exited before READY: %s", strings.TrimSpace(c.stderr.String()))
		case <-timeout:
			c.Kill()
			return nil, errors.New("child not READY within 15 s")
		}
	}
}

func (c *Child) signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to child %d: %v", sig, c.Pid(), err)
	}
}

// Freeze sends SIGSTOP and waits until every thread of the child is
// stopped: kill(2) returns before the signal has taken effect.
func (c *Child) Freeze() {
	c.t.Helper()
	c.stopped.Store(true)
	c.signal(syscall.SIGSTOP)
	deadline := time.Now().Add(5 * time.Second)
	for !c.allStopped() {
		if time.Now().After(deadline) {
			c.t.Fatalf("child %d not stopped within 5 s of SIGSTOP", c.Pid())
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether /proc shows every thread of the child in
// state T (stopped).
func (c *Child) allStopped() bool {
	dir := fmt.Sprintf("/proc/%d/task", c.Pid())
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// The state follows the parenthesised command name.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Thaw sends SIGCONT.
func (c *Child) Thaw() {
	c.t.Helper()
	c.signal(syscall.SIGCONT)
	c.stopped.Store(false)
}

// Kill sends SIGKILL (after SIGCONT if frozen) and waits, bounded, for the
// process to be gone. It is idempotent.
func (c *Child) Kill() {
	c.killOnce.Do(func() {
		if c.stopped.Load() {
			c.cmd.Process.Signal(syscall.SIGCONT)
		}
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			c.t.Errorf("child %d did not exit within 5 s of SIGKILL", c.Pid())
		}
	})
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 16<<10 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-8<<10:]...)
	}
	w.mu.Unlock()
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// lines sends each complete line written to it on ch.
type lines struct {
	mu  sync.Mutex
	buf []byte
	ch  chan string
}

func (w *lines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		select {
		case w.ch <- string(w.buf[:i]):
		default:
		}
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}
