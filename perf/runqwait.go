package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// runqWait sums, over this process's threads, the time each spent ready
// to run but waiting for a CPU (the second field of
// /proc/self/task/*/schedstat), or -1 where the kernel does not say. A
// thread that ended takes its share along; the Go runtime rarely ends
// its threads.
func runqWait() time.Duration {
	files, err := filepath.Glob("/proc/self/task/*/schedstat")
	if err != nil || len(files) == 0 {
		return -1
	}
	var sum int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended meanwhile
		}
		fs := bytes.Fields(b)
		if len(fs) < 2 {
			return -1
		}
		n, err := strconv.ParseInt(string(fs[1]), 10, 64)
		if err != nil {
			return -1
		}
		sum += n
	}
	return time.Duration(sum)
}

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
