package lock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests in this file run a lock node in a child process (this test
// binary re-executed), so that it can be killed with SIGKILL or frozen
// with SIGSTOP. The child takes one-line commands on stdin:
//
//	hold <shared|exclusive> <key> <node,node,...>   a new holder locks key
//	free <key>                                      FREE or HELD here
//	start <name> <mode> <key> <node,...>            holder <name> (made on
//	                                                first use) locks key in
//	                                                the background; answers
//	                                                DONE <name> OK|ERR <error>
//
// and answers each with one line.

const envLockChild = "RPCXBATCH_LOCK_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envLockChild) == "1" {
		os.Exit(runLockChild())
	}
	switch os.Getenv(envPartRole) {
	case "store":
		os.Exit(runPartStore())
	case "node":
		os.Exit(runPartNode())
	}
	os.Exit(m.Run())
}

func runLockChild() int {
	n, kill, err := startNode("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock child:", err)
		return 2
	}
	defer kill()
	fmt.Printf("ADDR %s\n", n.Addr())
	var holders []*Holder
	named := map[string]*Holder{}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "hold":
			mode := Shared
			if f[1] == "exclusive" {
				mode = Exclusive
			}
			h, err := n.NewHolder(context.Background())
			if err == nil {
				holders = append(holders, h)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = h.LockOn(ctx, strings.Split(f[3], ","), mode, f[2])
				cancel()
			}
			if err != nil {
				say("ERR %v", err)
			} else {
				say("OK")
			}
		case len(f) == 5 && f[0] == "start":
			h := named[f[1]]
			if h == nil {
				h, _ = n.NewHolder(context.Background())
				named[f[1]] = h
			}
			mode := Shared
			if f[2] == "exclusive" {
				mode = Exclusive
			}
			go func(name string) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := h.LockOn(ctx, strings.Split(f[4], ","), mode, f[3])
				cancel()
				if err != nil {
					h.ReleaseAll()
					say("DONE %s ERR %v", name, err)
				} else {
					say("DONE %s OK", name)
				}
			}(f[1])
			continue
		case len(f) == 2 && f[0] == "free":
			if freeOn(n, f[1]) {
				say("FREE")
			} else {
				say("HELD")
			}
		default:
			say("ERR bad command")
		}
	}
	return 0
}

// lockChild is a lock node in a child process.
type lockChild struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	addr  string
}

func startLockChild(t *testing.T) *lockChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envLockChild+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &lockChild{cmd: cmd, in: in, lines: make(chan string, 16)}
	// The reader ends when the child's stdout closes: at its exit, which
	// the cleanup below brings about.
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	first := c.read(t)
	if !strings.HasPrefix(first, "ADDR ") {
		t.Fatalf("lock child said %q, want its address", first)
	}
	c.addr = strings.TrimPrefix(first, "ADDR ")
	return c
}

func (c *lockChild) read(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("lock child exited")
		}
		return l
	case <-time.After(15 * time.Second):
		t.Fatal("lock child did not answer in 15 s")
		return ""
	}
}

func (c *lockChild) do(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		t.Fatal(err)
	}
	return c.read(t)
}

func (c *lockChild) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(c.cmd.Process.Pid, sig); err != nil {
		t.Fatal(err)
	}
}

// A node process killed with SIGKILL while its holder holds locks on this
// node: they are free again within NodeTimeout (the heartbeat timeout)
// plus one second.
func TestProcessSIGKILLFreesItsHoldersLocks(t *testing.T) {
	b := serveNode(t)
	c := startLockChild(t)
	if got := c.do(t, fmt.Sprintf("hold exclusive k %s,%s", c.addr, b.Addr())); got != "OK" {
		t.Fatalf("child hold: %s", got)
	}
	if got := c.do(t, fmt.Sprintf("hold shared s %s", b.Addr())); got != "OK" {
		t.Fatalf("child hold: %s", got)
	}
	if freeOn(b, "k") || freeOn(b, "s") {
		t.Fatal("the child's locks are not held here")
	}
	waiter := newHolder(t, b)
	wch := lockAsync(context.Background(), waiter, Exclusive, "k")
	eventually(t, "waiter queued", func() bool { _, _, q := b.table.snapshot("k"); return q == 1 })
	killed := time.Now()
	c.signal(t, syscall.SIGKILL)
	if err := recv(t, wch, "waiter behind the killed node's holder"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	eventually(t, "s free", func() bool { return freeOn(b, "s") })
	t.Logf("locks of the killed node's holders freed %v after SIGKILL (NodeTimeout %v)", took, b.cfg.NodeTimeout)
	if took > b.cfg.NodeTimeout+time.Second {
		t.Errorf("freed %v after SIGKILL, want within NodeTimeout %v + 1 s", took, b.cfg.NodeTimeout)
	}
}

// All or nothing with one node frozen (SIGSTOP): the request fails by its
// deadline and holds nothing on either node, also once the frozen node
// thaws.
func TestProcessSIGSTOPAllOrNothing(t *testing.T) {
	b := serveNode(t)
	c := startLockChild(t)
	// The child serves a request first, so lanes to it are up.
	h := newHolder(t, b)
	if err := h.LockOn(context.Background(), []string{b.Addr(), c.addr}, Shared, "warm"); err != nil {
		t.Fatal(err)
	}
	h.ReleaseAll()
	c.signal(t, syscall.SIGSTOP)
	// The signal is delivered asynchronously: wait until the kernel shows
	// the child stopped, so that it cannot answer the request below.
	stat := fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)
	eventually(t, "child stopped", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'T'
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := h.LockOn(ctx, []string{b.Addr(), c.addr}, Exclusive, "k")
	took := time.Since(start)
	if err == nil {
		t.Fatal("request with a frozen node succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrNodeLost) {
		t.Fatalf("request with a frozen node: %v, want DeadlineExceeded or ErrNodeLost", err)
	}
	if took > 2500*time.Millisecond {
		t.Errorf("request returned %v after a 1 s deadline", took)
	}
	if !freeOn(b, "k") {
		t.Fatalf("k held here after the failed request: %s", dump(b, "k"))
	}
	time.Sleep(500 * time.Millisecond) // frozen a while past the deadline
	c.signal(t, syscall.SIGCONT)
	// Once thawed the child serves what was queued for it; k must end
	// free there and stay free.
	deadline := time.Now().Add(10 * time.Second)
	for c.do(t, "free k") != "FREE" {
		if time.Now().After(deadline) {
			t.Fatal("k still held on the thawed node")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if got := c.do(t, "free k"); got != "FREE" {
		t.Fatalf("k on the thawed node: %s", got)
	}
	if !freeOn(b, "k") {
		t.Fatal("k held here")
	}
}

// A deadlock cycle across two node processes: exactly one of the two
// requests fails with ErrDeadlock; the other is granted.
func TestProcessTwoNodeDeadlockExactlyOne(t *testing.T) {
	b := serveNode(t)
	c := startLockChild(t)
	both := b.Addr() + "," + c.addr
	ctx := context.Background()
	h := newHolder(t, b) // the older holder
	if err := h.LockOn(ctx, []string{b.Addr(), c.addr}, Exclusive, "p"); err != nil {
		t.Fatal(err)
	}
	if got := c.do(t, "start c1 exclusive q "+both); got != "DONE c1 OK" {
		t.Fatalf("child lock: %s", got)
	}
	errc := make(chan error, 1)
	go func() {
		err := h.LockOn(ctx, []string{b.Addr(), c.addr}, Exclusive, "q")
		if err != nil {
			h.ReleaseAll()
		}
		errc <- err
	}()
	if _, err := fmt.Fprintln(c.in, "start c1 exclusive p "+both); err != nil {
		t.Fatal(err)
	}
	child := c.read(t)
	mine := recv(t, errc, "this process's request")
	deadlocks := 0
	if errors.Is(mine, ErrDeadlock) {
		deadlocks++
	} else if mine != nil {
		t.Fatalf("this process's request: %v", mine)
	}
	switch {
	case strings.HasPrefix(child, "DONE c1 ERR") && strings.Contains(child, ErrDeadlock.Error()):
		deadlocks++
	case child != "DONE c1 OK":
		t.Fatalf("child's request: %s", child)
	}
	if deadlocks != 1 {
		t.Fatalf("%d ErrDeadlock (this process: %v; child: %s), want exactly 1", deadlocks, mine, child)
	}
}
