package main

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// usage is a snapshot of what this process has consumed so far; a point's
// cost is the difference of two snapshots.
type usage struct {
	CPU    time.Duration // user + system, all threads
	Writes int64         // write-family syscalls (syscw), -1 if unknown
	Bytes  int64         // bytes passed to them (wchar), -1 if unknown
}

func readUsage() usage {
	u := usage{Writes: -1, Bytes: -1, CPU: benchkit.ProcessCPU()}
	// /proc/self/io counts every write syscall of the process, whichever
	// goroutine or library made it: the honest count for both paths.
	if b, err := os.ReadFile("/proc/self/io"); err == nil {
		u.Writes = procField(b, "syscw:")
		u.Bytes = procField(b, "wchar:")
	}
	return u
}

func (u usage) sub(v usage) usage {
	d := usage{CPU: u.CPU - v.CPU, Writes: -1, Bytes: -1}
	if u.Writes >= 0 && v.Writes >= 0 {
		d.Writes = u.Writes - v.Writes
	}
	if u.Bytes >= 0 && v.Bytes >= 0 {
		d.Bytes = u.Bytes - v.Bytes
	}
	return d
}

// procField returns the integer after name in a /proc file ("VmHWM:",
// "syscw:"), scaled by 1024 when it is given in kB; -1 when absent.
func procField(b []byte, name string) int64 {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return -1
	}
	line := b[i+len(name):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	line = bytes.TrimSpace(line)
	scale := int64(1)
	if v, ok := bytes.CutSuffix(line, []byte(" kB")); ok {
		line, scale = v, 1024
	}
	n, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil {
		return -1
	}
	return n * scale
}

// rssNow is the resident set size now, in bytes (-1 if unknown).
func rssNow() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	return procField(b, "VmRSS:")
}

// settleMemory returns freed memory to the OS and resets the kernel's peak
// RSS mark (VmHWM), so the next peak is the next point's own and not one
// left over from an earlier point. It reports whether the reset worked.
func settleMemory() bool {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM, the peak RSS since the last settleMemory (or since the
// process started, if the reset is not supported).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	return procField(b, "VmHWM:")
}

// sampler samples the goroutine count (and the RSS, a fallback for kernels
// without clear_refs) while a point runs, for the peaks. Its goroutine is
// owned by whoever called startSampler and ends at stop.
type sampler struct {
	peakG, peakRSS atomic.Int64
	quit           chan struct{}
	done           sync.WaitGroup
}

// sampleEvery is the goroutine sampling period: short enough to see the
// burst of a closed loop, long enough to cost nothing measurable.
const sampleEvery = 5 * time.Millisecond

func startSampler() *sampler {
	s := &sampler{quit: make(chan struct{})}
	s.peakG.Store(int64(runtime.NumGoroutine()))
	s.done.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for n := 0; ; n++ {
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			if g := int64(runtime.NumGoroutine()); g > s.peakG.Load() {
				s.peakG.Store(g)
			}
			if n%20 == 0 {
				if r := rssNow(); r > s.peakRSS.Load() {
					s.peakRSS.Store(r)
				}
			}
		}
	})
	return s
}

// stop ends the sampling and returns the peak goroutine count and the
// peak RSS (VmHWM when resetOK, else the sampled maximum).
func (s *sampler) stop(resetOK bool) (goroutines, rss int64) {
	close(s.quit)
	s.done.Wait()
	rss = s.peakRSS.Load()
	if resetOK {
		rss = max(rss, peakRSS())
	}
	return s.peakG.Load(), rss
}

// procString returns the text after "name<tabs>: " in a /proc file.
func procString(b []byte, name string) string {
	i := bytes.Index(b, []byte(name))
	if i < 0 {
		return ""
	}
	line := b[i+len(name):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	_, v, _ := bytes.Cut(line, []byte(":"))
	return string(bytes.TrimSpace(v))
}

// numCPU is the machine's logical CPU count.
func numCPU() int { return runtime.NumCPU() }

// loadAvg is the machine's one-minute load average, -1 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	fs := bytes.Fields(b)
	if len(fs) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(string(fs[0]), 64)
	if err != nil {
		return -1
	}
	return v
}
