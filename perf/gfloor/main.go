// Command gfloor measures the memory a Go process keeps after a burst of
// goroutines has ended, with nothing of rpcx or rpcxbatch in it: the
// floor under the harness's "memory after the load" figures.
//
// The Go runtime never frees a goroutine's record (its g) once made; it
// keeps it for reuse (golang/go#9869, #34457). Goroutine stacks go back at
// a collection, the records do not. So a process that once ran ten
// thousand goroutines at once (the harness's writers, a server's request
// goroutines) stays above its idle RSS by their records whatever the
// libraries in it do, even after runtime/debug.FreeOSMemory.
//
//	go run ./perf/gfloor                     # 10,000 goroutines, 30 s after
//	go run ./perf/gfloor -goroutines 1000 -wait 5s
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	n := flag.Int("goroutines", 10000, "goroutines alive at once in the burst")
	wait := flag.Duration("wait", 30*time.Second, "how long after the burst to read the RSS (FreeOSMemory at its start and every 10 s)")
	flag.Parse()
	if err := run(os.Stdout, *n, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "gfloor:", err)
		os.Exit(1)
	}
}

// floor is what one run measured: RSS in KiB, and the live heap (after a
// collection) in bytes, which shows the goroutine records alone.
type floor struct {
	idle, peak, after   int64
	heapIdle, heapAfter uint64
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func run(w io.Writer, n int, wait time.Duration) error {
	f, err := measure(n, wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "RSS KiB: idle %d, %d goroutines alive %d, %v after they ended (FreeOSMemory) %d: %.2f× idle; live heap after a collection %d → %d KiB\n",
		f.idle, n, f.peak, wait, f.after, float64(f.after)/float64(f.idle), f.heapIdle>>10, f.heapAfter>>10)
	return nil
}

func measure(n int, wait time.Duration) (floor, error) {
	var f floor
	var err error
	f.heapIdle = liveHeap()
	debug.FreeOSMemory()
	if f.idle, err = rssKiB(); err != nil {
		return f, err
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			var frame [2048]byte // a caller's stack in use, as an RPC caller's is
			frame[i%len(frame)] = 1
			<-stop
			runtime.KeepAlive(&frame)
		})
	}
	for runtime.NumGoroutine() < n {
		runtime.Gosched()
	}
	if f.peak, err = rssKiB(); err != nil {
		return f, err
	}
	close(stop)
	wg.Wait()
	deadline := time.Now().Add(wait)
	for {
		debug.FreeOSMemory()
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		time.Sleep(min(left, 10*time.Second))
	}
	f.heapAfter = liveHeap()
	f.after, err = rssKiB()
	return f, err
}

// rssKiB is the process's resident set size (VmRSS).
func rssKiB() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the RSS (Linux only): %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}
