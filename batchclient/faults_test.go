package batchclient_test

// Process-level fault tests: the servers run as child processes (this test
// binary re-executed with faultChildEnv set, see TestMain) so that they can
// be killed with SIGKILL, frozen with SIGSTOP, thawed with SIGCONT and
// restarted at the same address.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testsvc"
)

const (
	faultChildEnv     = "RPCXBATCH_CHILD"
	faultChildAddrEnv = "RPCXBATCH_CHILD_ADDR"
)

func TestMain(m *testing.M) {
	if os.Getenv(faultChildEnv) == "1" {
		os.Exit(faultChildServer())
	}
	os.Exit(m.Run())
}

// FaultProbe lets a test ask a child server how many batched calls it has
// started, so it knows when its calls have reached the server.
type FaultProbe struct{ p *batchserver.Plugin }

// Calls returns the server's rpcxbatch.server.calls counter.
func (f *FaultProbe) Calls(_ context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	r.C = int(f.p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 }).Count())
	return nil
}

// faultChildServer is the child process: it serves Arith, Echo and
// FaultProbe with the batch plugin at $RPCXBATCH_CHILD_ADDR, prints its
// address, its incarnation and READY, and exits when its stdin closes (the
// parent is gone).
func faultChildServer() int {
	addr := os.Getenv(faultChildAddrEnv)
	s := server.NewServer()
	p, err := batchserver.New(s)
	if err == nil {
		err = errors.Join(
			s.RegisterName("Arith", new(testsvc.Arith), ""),
			s.RegisterName("Echo", new(testsvc.Echo), ""),
			s.RegisterName("FaultProbe", &FaultProbe{p: p}, ""))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: setup:", err)
		return 2
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve("tcp", addr) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Address() == nil {
		select {
		case err := <-errc:
			fmt.Fprintln(os.Stderr, "child: serve:", err)
			return 3
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "child: server did not start")
			return 4
		}
	}
	fmt.Printf("ADDR %s\nINC %d\nREADY\n", s.Address().String(), p.Incarnation())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Fprintln(os.Stderr, "child: serve:", <-errc)
	return 5
}

// faultChild is a child server process.
type faultChild struct {
	t        testing.TB
	cmd      *exec.Cmd
	addr     string
	inc      uint64
	stdin    *os.File // closing it makes the child exit
	exited   chan struct{}
	stderr   *faultTail
	stopped  atomic.Bool
	killOnce sync.Once
}

// faultTail keeps the last bytes written to it.
type faultTail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *faultTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 16<<10 {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-8<<10:]...)
	}
	w.mu.Unlock()
	return len(p), nil
}

func (w *faultTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// faultLines sends each complete line written to it on lines.
type faultLines struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func (w *faultLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		select {
		case w.lines <- string(w.buf[:i]):
		default:
		}
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// startFaultChild starts a child server at addr ("127.0.0.1:0" for a free
// port), retrying while the address cannot be bound yet. It is killed in
// t.Cleanup.
func startFaultChild(t testing.TB, addr string) *faultChild {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		ch, err := tryFaultChild(t, addr)
		if err == nil {
			return ch
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("child server at %s did not start: %v", addr, lastErr)
	return nil
}

func tryFaultChild(t testing.TB, addr string) (*faultChild, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	out := &faultLines{lines: make(chan string, 16)}
	ch := &faultChild{t: t, stdin: inW, exited: make(chan struct{}), stderr: &faultTail{}}
	ch.cmd = exec.Command(os.Args[0], "-test.run=^$")
	ch.cmd.Env = append(os.Environ(), faultChildEnv+"=1", faultChildAddrEnv+"="+addr)
	ch.cmd.Stdin, ch.cmd.Stdout, ch.cmd.Stderr = inR, out, ch.stderr
	if err := ch.cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	inR.Close()
	go func() {
		ch.cmd.Wait()
		close(ch.exited)
	}()
	t.Cleanup(func() {
		ch.kill()
		if t.Failed() {
			t.Logf("stderr of child %s (pid %d):\n%s", ch.addr, ch.cmd.Process.Pid, ch.stderr)
		}
	})
	timeout := time.After(15 * time.Second)
	for {
		select {
		case line := <-out.lines:
			switch {
			case strings.HasPrefix(line, "ADDR "):
				ch.addr = strings.TrimPrefix(line, "ADDR ")
			case strings.HasPrefix(line, "INC "):
				ch.inc, err = strconv.ParseUint(strings.TrimPrefix(line, "INC "), 10, 64)
				if err != nil {
					return nil, err
				}
			case line == "READY":
				return ch, nil
			}
		case <-ch.exited:
			return nil, fmt.Errorf("child exited before READY: %s", strings.TrimSpace(ch.stderr.String()))
		case <-timeout:
			ch.kill()
			return nil, errors.New("child not READY within 15 s")
		}
	}
}

func (ch *faultChild) signal(sig syscall.Signal) {
	ch.t.Helper()
	require.NoError(ch.t, ch.cmd.Process.Signal(sig))
}

// freeze sends SIGSTOP and waits until every thread of the child is
// stopped: kill(2) returns before the signal has taken effect.
func (ch *faultChild) freeze() {
	ch.t.Helper()
	ch.stopped.Store(true)
	ch.signal(syscall.SIGSTOP)
	deadline := time.Now().Add(5 * time.Second)
	for !ch.allStopped() {
		if time.Now().After(deadline) {
			ch.t.Fatalf("child %d not stopped within 5 s of SIGSTOP", ch.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether /proc shows every thread of the child in
// state T (stopped).
func (ch *faultChild) allStopped() bool {
	dir := fmt.Sprintf("/proc/%d/task", ch.cmd.Process.Pid)
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

// thaw sends SIGCONT.
func (ch *faultChild) thaw() {
	ch.t.Helper()
	ch.signal(syscall.SIGCONT)
	ch.stopped.Store(false)
}

// kill sends SIGKILL (after SIGCONT if frozen) and waits, bounded, for the
// process to be gone. Idempotent.
func (ch *faultChild) kill() {
	ch.killOnce.Do(func() {
		if ch.stopped.Load() {
			ch.cmd.Process.Signal(syscall.SIGCONT)
		}
		ch.cmd.Process.Signal(syscall.SIGKILL)
		ch.stdin.Close()
		select {
		case <-ch.exited:
		case <-time.After(5 * time.Second):
			ch.t.Errorf("child %d did not exit within 5 s of SIGKILL", ch.cmd.Process.Pid)
		}
	})
}

// faultProbeCalls returns how many batched calls the child has started.
func faultProbeCalls(t testing.TB, c *batchclient.Client, addr string) int {
	t.Helper()
	var r testsvc.Reply
	start := time.Now()
	err := c.Call(ctxT(t, 10*time.Second), addr, "FaultProbe", "Calls", &testsvc.Args{}, &r)
	require.NoError(t, err, "probe of %s after %v: %+v", addr, time.Since(start), c.Info(addr))
	if d := time.Since(start); d > time.Second {
		t.Logf("slow probe of %s: %v", addr, d)
	}
	return r.C
}

// faultResult is the outcome of one call and when it came back.
type faultResult struct {
	err error
	c   int
	at  time.Time
}

// faultFire starts n calls of method with args(i) in goroutines; done is
// closed when all have returned.
func faultFire(c *batchclient.Client, ctx context.Context, addr, method string, n int, args func(i int) testsvc.Args) (res []faultResult, returned *atomic.Int64, done chan struct{}) {
	res = make([]faultResult, n)
	returned = new(atomic.Int64)
	done = make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a := args(i)
			var r testsvc.Reply
			err := c.Call(ctx, addr, "Arith", method, &a, &r)
			res[i] = faultResult{err: err, c: r.C, at: time.Now()}
			returned.Add(1)
		}(i)
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return res, returned, done
}

// faultWait waits for done up to d; it reports whether done closed.
func faultWait(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestFaultKillFailsCallsInFlight(t *testing.T) {
	child := startFaultChild(t, "127.0.0.1:0")
	c := newClient(t)
	waitConnected(t, c, child.addr)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), child.addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	require.Equal(t, 6, r.C)

	runtime.GC()
	before := runtime.NumGoroutine()
	startedBefore := faultProbeCalls(t, c, child.addr)

	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, returned, done := faultFire(c, ctx, child.addr, "Sleep", n, func(i int) testsvc.Args { return testsvc.Args{A: 10000, B: i} })
	// Every call must be running on the server before the kill.
	deadline := time.Now().Add(15 * time.Second)
	for probes := 1; ; probes++ {
		// Each probe counts itself.
		started := faultProbeCalls(t, c, child.addr) - startedBefore - probes
		if started >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d calls reached the server within 15 s", started, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, returned.Load(), "calls returned before the kill")

	killAt := time.Now()
	child.kill()
	if !faultWait(done, 10*time.Second) {
		t.Fatalf("%d of %d calls still hang 10 s after SIGKILL", n-int(returned.Load()), n)
	}
	var maxLat time.Duration
	kinds := map[string]int{}
	connErrs := 0
	for i, rs := range res {
		if !assert.Error(t, rs.err, "call %d returned C=%d after the kill", i, rs.c) {
			continue
		}
		if errors.Is(rs.err, batchclient.ErrConnection) {
			connErrs++
		} else {
			kinds[rs.err.Error()]++
		}
		maxLat = max(maxLat, rs.at.Sub(killAt))
	}
	t.Logf("kill: %d calls in flight; last returned %v after SIGKILL; %d ErrConnection, others: %v", n, maxLat, connErrs, kinds)
	assert.Less(t, maxLat, time.Second, "slowest call returned too long after the kill")
	assert.GreaterOrEqual(t, connErrs, n*9/10, "calls failed without ErrConnection: %v", kinds)

	// The client keeps no goroutine per lost call.
	deadline = time.Now().Add(5 * time.Second)
	const margin = 5
	for {
		runtime.GC()
		g := runtime.NumGoroutine()
		if g <= before+margin {
			t.Logf("kill: goroutines %d before the calls, %d after", before, g)
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines: %d before the calls, still %d 5 s after the kill:\n%s", before, g, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFaultFreezeDetectedByHeartbeat(t *testing.T) {
	a := startFaultChild(t, "127.0.0.1:0")
	b := startFaultChild(t, "127.0.0.1:0")
	c := newClient(t)
	opts := c.Options()
	waitConnected(t, c, a.addr)
	waitConnected(t, c, b.addr)
	var r testsvc.Reply
	for _, addr := range []string{a.addr, b.addr} {
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	}

	// Calls to B run throughout the freeze of A.
	var (
		bOK      atomic.Int64
		bErrMu   sync.Mutex
		bErrs    []error
		bWG      sync.WaitGroup
		stopB    = make(chan struct{})
		bWorkers = 4
	)
	for w := 0; w < bWorkers; w++ {
		bWG.Add(1)
		go func(w int) {
			defer bWG.Done()
			for i := 0; ; i++ {
				select {
				case <-stopB:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var r testsvc.Reply
				err := c.Call(ctx, b.addr, "Arith", "Mul", &testsvc.Args{A: w, B: i}, &r)
				cancel()
				if err == nil && r.C != w*i {
					err = fmt.Errorf("B: %d*%d gave %d", w, i, r.C)
				}
				if err != nil {
					bErrMu.Lock()
					bErrs = append(bErrs, err)
					bErrMu.Unlock()
					continue
				}
				bOK.Add(1)
			}
		}(w)
	}
	t.Cleanup(func() {
		// In case of an early exit: stop the B loop, bounded.
		select {
		case <-stopB:
		default:
			close(stopB)
		}
		bWG.Wait()
	})
	time.Sleep(100 * time.Millisecond)

	stopAt := time.Now()
	bBefore := bOK.Load()
	a.freeze()
	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, returned, done := faultFire(c, ctx, a.addr, "Mul", n, func(i int) testsvc.Args { return testsvc.Args{A: i, B: 2} })
	bound := opts.HeartbeatTimeout + time.Second
	if !faultWait(done, bound+5*time.Second) {
		t.Fatalf("%d of %d calls to frozen A still hang %v after SIGSTOP", n-int(returned.Load()), n, time.Since(stopAt))
	}
	detectedAt := time.Now()

	// While A stays frozen the client's reconnect attempts hang in the
	// handshake until DialTimeout: calls to A wait for an attempt at most,
	// then fail with ErrPeerDown, never for their whole context. A is
	// thawed only after an attempt has timed out.
	var downCalls int
	var maxDownLat time.Duration
	downKinds := map[string]int{}
	for downCalls == 0 || time.Since(detectedAt) < opts.DialTimeout-500*time.Millisecond {
		start := time.Now()
		var r testsvc.Reply
		err := c.Call(ctx, a.addr, "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &r)
		lat := time.Since(start)
		require.Error(t, err, "call to frozen A succeeded")
		require.Less(t, lat, opts.DialTimeout+time.Second, "call to frozen A waited too long: %v", err)
		maxDownLat = max(maxDownLat, lat)
		downCalls++
		switch {
		case errors.Is(err, batchclient.ErrPeerDown):
			downKinds["ErrPeerDown"]++
		case errors.Is(err, batchclient.ErrConnection):
			downKinds["ErrConnection"]++
		default:
			t.Errorf("call to frozen A failed with neither ErrPeerDown nor ErrConnection: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("freeze: %d calls to A while it stayed frozen failed in at most %v: %v", downCalls, maxDownLat, downKinds)

	close(stopB)
	require.True(t, faultWait(func() chan struct{} {
		ch := make(chan struct{})
		go func() { bWG.Wait(); close(ch) }()
		return ch
	}(), 10*time.Second), "B loop did not stop")
	freezeWindow := time.Since(stopAt)
	bDuring := bOK.Load() - bBefore

	var maxLat time.Duration
	hb, conn := 0, 0
	others := map[string]int{}
	for i, rs := range res {
		if !assert.Error(t, rs.err, "call %d to frozen A returned C=%d", i, rs.c) {
			continue
		}
		maxLat = max(maxLat, rs.at.Sub(stopAt))
		switch {
		case errors.Is(rs.err, batchclient.ErrHeartbeat):
			hb++
			conn++
		case errors.Is(rs.err, batchclient.ErrConnection):
			conn++
		default:
			others[rs.err.Error()]++
		}
	}
	t.Logf("freeze: %d calls to A failed, last %v after SIGSTOP (heartbeat timeout %v); %d ErrConnection of which %d ErrHeartbeat; others %v",
		n, maxLat, opts.HeartbeatTimeout, conn, hb, others)
	t.Logf("freeze: detected %v after SIGSTOP; %d calls to B succeeded during the %v freeze window (%d failed)",
		detectedAt.Sub(stopAt), bDuring, freezeWindow, len(bErrs))
	assert.Less(t, maxLat, bound, "frozen peer detected too late")
	assert.Equal(t, n, conn, "calls to frozen A failed without ErrConnection: %v", others)
	assert.Positive(t, hb, "no call to frozen A failed with ErrHeartbeat")
	assert.Empty(t, bErrs, "calls to B failed while A was frozen")
	assert.GreaterOrEqual(t, bDuring, int64(300), "too few calls to B completed while A was frozen")

	contAt := time.Now()
	a.thaw()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in := c.Info(a.addr)
		if in.Status == batchclient.Connected {
			t.Logf("freeze: reconnected to A %v after SIGCONT (incarnation unchanged: %v)", time.Since(contAt), in.Incarnation == a.inc)
			assert.Equal(t, a.inc, in.Incarnation)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection to A within 10 s of SIGCONT: %+v", in)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 100; i++ {
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), a.addr, "Arith", "Mul", &testsvc.Args{A: i, B: 5}, &r))
		require.Equal(t, i*5, r.C)
	}
}

func TestFaultRestartAtSameAddress(t *testing.T) {
	first := startFaultChild(t, "127.0.0.1:0")
	addr := first.addr
	c := newClient(t, batchclient.WithReconnect(20*time.Millisecond, 200*time.Millisecond))
	waitConnected(t, c, addr)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	in := c.Info(addr)
	require.Equal(t, batchclient.Connected, in.Status)
	require.Equal(t, first.inc, in.Incarnation)
	inc1 := in.Incarnation

	// Calls in flight at the kill: each fails or returns its own B=1.
	const nBefore = 500
	startedBefore := faultProbeCalls(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resBefore, returnedBefore, doneBefore := faultFire(c, ctx, addr, "Sleep", nBefore, func(int) testsvc.Args { return testsvc.Args{A: 200, B: 1} })
	deadline := time.Now().Add(5 * time.Second)
	for probes := 1; faultProbeCalls(t, c, addr)-startedBefore-probes < nBefore/2 && time.Now().Before(deadline); probes++ {
		time.Sleep(5 * time.Millisecond)
	}
	killAt := time.Now()
	first.kill()

	second := startFaultChild(t, addr)
	readyAt := time.Now()
	require.NotEqual(t, inc1, second.inc, "the new server drew the same incarnation")
	deadline = time.Now().Add(10 * time.Second)
	for {
		in = c.Info(addr)
		if in.Status == batchclient.Connected && in.Incarnation != inc1 {
			t.Logf("restart: connected to the new server %v after SIGKILL, %v after it was READY",
				time.Since(killAt), time.Since(readyAt))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection to the restarted server within 10 s: %+v", in)
		}
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, second.inc, in.Incarnation)

	if !faultWait(doneBefore, 10*time.Second) {
		t.Fatalf("%d of %d calls made before the kill still hang", nBefore-int(returnedBefore.Load()), nBefore)
	}
	failed, ok := 0, 0
	for i, rs := range resBefore {
		switch {
		case rs.err != nil:
			failed++
		case rs.c == 1:
			ok++
		default:
			t.Errorf("call %d made before the kill returned C=%d, want 1 or an error", i, rs.c)
		}
	}
	t.Logf("restart: of %d calls in flight at the kill, %d failed and %d returned their own reply", nBefore, failed, ok)

	// Calls after the restart each get their own reply.
	const nAfter = 1000
	resAfter, returnedAfter, doneAfter := faultFire(c, ctx, addr, "Sleep", nAfter, func(i int) testsvc.Args { return testsvc.Args{A: i % 5, B: 1000 + i} })
	if !faultWait(doneAfter, 10*time.Second) {
		t.Fatalf("%d of %d calls after the restart still hang", nAfter-int(returnedAfter.Load()), nAfter)
	}
	for i, rs := range resAfter {
		if assert.NoError(t, rs.err, "call %d after the restart", i) {
			assert.Equal(t, 1000+i, rs.c, "call %d after the restart got another call's reply", i)
		}
	}
	assert.Equal(t, second.inc, c.Info(addr).Incarnation)
}
