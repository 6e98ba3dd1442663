package childproc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Probe is the child's introspection service.
type Probe struct {
	p *batchserver.Plugin

	mu        sync.Mutex
	next      map[uint32]uint32 // per key: the sequence number expected next
	byNumber  map[uint32]int    // sends received per sequence number, all keys
	received  int
	reordered int

	// Tick's record since the last Ticks: how many ticks came, when the
	// last one came, and the longest time between two.
	tickMu   sync.Mutex
	ticks    int
	lastTick time.Time
	maxGap   time.Duration
	// stalled sums the gaps longer than stallGap.
	stalled time.Duration
}

// stallGap is the shortest gap between two ticks that Ticks counts as a
// stall.
const stallGap = 50 * time.Millisecond

// Tick records that an entry arrived (a cast): Ticks reports how many did
// and the longest time between two of them, the longest pause in what
// the child received.
func (pr *Probe) Tick(_ context.Context, _ *testsvc.Args, _ *testsvc.Reply) error {
	now := time.Now()
	pr.tickMu.Lock()
	defer pr.tickMu.Unlock()
	if !pr.lastTick.IsZero() {
		gap := now.Sub(pr.lastTick)
		pr.maxGap = max(pr.maxGap, gap)
		if gap > stallGap {
			pr.stalled += gap
		}
	}
	pr.lastTick = now
	pr.ticks++
	return nil
}

// TickStats is what Ticks reports: the ticks since the last Ticks, the
// longest time between two of them, and the sum of the times between two
// that were longer than 50 ms, in nanoseconds.
type TickStats struct {
	Ticks   int
	MaxGap  int64
	Stalled int64
}

// Ticks reports and resets Tick's record.
func (pr *Probe) Ticks(_ context.Context, _ *testsvc.Args, r *TickStats) error {
	pr.tickMu.Lock()
	defer pr.tickMu.Unlock()
	*r = TickStats{Ticks: pr.ticks, MaxGap: int64(pr.maxGap), Stalled: int64(pr.stalled)}
	pr.ticks, pr.lastTick, pr.maxGap, pr.stalled = 0, time.Time{}, 0, 0
	return nil
}

// SendsIn returns in C how many "seq" sends with a sequence number in
// [A, B) the child received, over all keys: a test tells the sends of one
// phase from another's by their numbers.
func (pr *Probe) SendsIn(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r.C = 0
	for n, k := range pr.byNumber {
		if int(n) >= a.A && int(n) < a.B {
			r.C += k
		}
	}
	return nil
}

// Calls returns how many batched calls the child has started.
func (pr *Probe) Calls(_ context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	r.C = int(pr.p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 }).Count())
	return nil
}

// SendStats reports the sends received by the "seq" handler: A is how many
// arrived, B how many arrived with a lower sequence number than one already
// seen for their key (out of order; a gap is not counted: sends may be lost
// with a connection, not reordered).
func (pr *Probe) SendStats(_ context.Context, _ *testsvc.Args, r *testsvc.Args) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r.A, r.B = pr.received, pr.reordered
	return nil
}

// seq is the "seq" send handler: payload is key (4 bytes) and sequence
// number (4 bytes), big endian.
func (pr *Probe) seq(_ context.Context, payload []byte) {
	if len(payload) < 8 {
		return
	}
	key, n := binary.BigEndian.Uint32(payload), binary.BigEndian.Uint32(payload[4:])
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.received++
	pr.byNumber[n]++
	if n < pr.next[key] {
		pr.reordered++
		return
	}
	pr.next[key] = n + 1
}

// serve is the child process: it serves Arith, Echo and Probe with the
// batch plugin at addr, prints its address, its incarnation and READY, and
// exits when its stdin closes (the parent is gone).
func serve(addr string) int {
	rlog.SetDummyLogger()
	s := server.NewServer()
	var p *batchserver.Plugin
	var err error
	if os.Getenv(envPlain) != "1" {
		pool, _ := strconv.Atoi(os.Getenv(envPool))
		p, err = batchserver.New(s, batchserver.WithPoolSize(pool))
	}
	if os.Getenv(envGuard) == "1" {
		s.Plugins.Add(batchserver.DepthGuard{})
	}
	pr := &Probe{p: p, next: make(map[uint32]uint32), byNumber: make(map[uint32]int)}
	if err == nil {
		err = errors.Join(
			s.RegisterName("Arith", new(testsvc.Arith), ""),
			s.RegisterName("Echo", new(testsvc.Echo), ""),
			s.RegisterName("Probe", pr, ""),
			s.RegisterName("Slow", new(testsvc.Slow), ""))
	}
	if err == nil && p != nil {
		err = p.HandleSend("seq", pr.seq)
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
	var inc uint64
	if p != nil {
		inc = p.Incarnation()
	}
	fmt.Printf("ADDR %s\nINC %d\nREADY\n", s.Address().String(), inc)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Fprintln(os.Stderr, "child: serve:", <-errc)
	return 5
}

// PluginState is what Probe.State reports of the child's batch plugin:
// the connections it keeps batch state for and the goroutines its workers
// keep parked (both 0 on a plain child).
type PluginState struct {
	Conns, Parked int64
}

// State reports the batch plugin's gauges.
func (pr *Probe) State(_ context.Context, _ *testsvc.Args, r *PluginState) error {
	*r = PluginState{}
	if pr.p == nil {
		return nil
	}
	read := func(name string) int64 {
		g, _ := pr.p.Metrics().Get(name).(interface{ Value() int64 })
		if g == nil {
			return -1
		}
		return g.Value()
	}
	r.Conns, r.Parked = read("rpcxbatch.server.connections"), read("rpcxbatch.server.workers.parked")
	return nil
}

// MemStats is what Probe.Mem reports of the child's memory.
type MemStats struct {
	HeapInuse, StackInuse, Sys uint64
	Goroutines                 int
}

// Mem reports the child's heap and stacks in use and its goroutines,
// after a collection.
func (pr *Probe) Mem(_ context.Context, _ *testsvc.Args, r *MemStats) error {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	*r = MemStats{HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse, Sys: ms.Sys, Goroutines: runtime.NumGoroutine()}
	return nil
}

// DumpGoroutines writes the child's goroutine profile (pprof's debug=1
// text) to the file named by RPCXBATCH_CHILD_DUMP, for a test that looks
// into what a load left behind; without it, it does nothing.
func (pr *Probe) DumpGoroutines(_ context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	path := os.Getenv("RPCXBATCH_CHILD_DUMP")
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("goroutine").WriteTo(f, 1)
}
