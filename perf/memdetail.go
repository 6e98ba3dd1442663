package main

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"time"
)

// MemDetail breaks a process's memory down as the Go runtime sees it, so
// that the memory a load leaves behind (afterload.go) can be told apart:
// live heap objects, heap the collector has freed but the process still
// holds, goroutine stacks, memory returned to the OS; and whether a
// collection has run at all since the load.
type MemDetail struct {
	RSS int64
	// RSSFile is the part of RSS that maps files (the binary's code and
	// data pages the process has touched); RSSAnon the rest, the
	// process's own memory.
	RSSFile, RSSAnon int64
	// Runtime is the memory the Go runtime holds outside the heap and
	// the stacks (span and GC metadata, OS thread stacks, profiling).
	Runtime int64
	// HeapObjects is the heap occupied by objects, live or not yet swept.
	HeapObjects int64
	// HeapFree is free heap the process still holds (not returned to the
	// OS); HeapReleased is free heap returned to the OS.
	HeapFree, HeapReleased int64
	// Stacks is the goroutine stack memory in use or cached.
	Stacks int64
	// HeapGoal is the heap size at which the next collection starts.
	HeapGoal int64
	// GCs is the number of completed collections since the process began.
	GCs        int64
	Goroutines int64
}

var memSamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/gc/heap/goal:bytes",
	"/gc/cycles/total:gc-cycles",
	"/sched/goroutines:goroutines",
	"/memory/classes/metadata/mcache/free:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/mspan/free:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/profiling/buckets:bytes",
}

// memDetailNow reads this process's memory without settling it first.
func memDetailNow() MemDetail {
	s := make([]metrics.Sample, len(memSamples))
	for i, name := range memSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return -1
		}
		return int64(s[i].Value.Uint64())
	}
	var rt int64
	for i := 7; i < len(s); i++ {
		rt += max(v(i), 0)
	}
	m := MemDetail{RSS: rssNow(), RSSFile: -1, RSSAnon: -1, HeapObjects: v(0), HeapFree: v(1), HeapReleased: v(2),
		Stacks: v(3), HeapGoal: v(4), GCs: v(5), Goroutines: v(6), Runtime: rt}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		m.RSSFile, m.RSSAnon = procField(b, "RssFile:"), procField(b, "RssAnon:")
	}
	return m
}

// Mem reports the server's memory breakdown as it is (nothing forced).
func (c *Control) Mem(_ context.Context, _ *Empty, r *MemDetail) error {
	*r = memDetailNow()
	return nil
}

func (cc *controlClient) mem(ctx context.Context) (MemDetail, error) {
	var r MemDetail
	return r, cc.call(ctx, 5*time.Second, "Mem", &Empty{}, &r)
}

// String is the breakdown in MB.
func (m MemDetail) String() string {
	return fmt.Sprintf("RSS %.0f (files %.1f, anonymous %.1f): heap objects %.1f, heap free held %.1f, stacks %.1f, runtime %.1f, released %.1f; heap goal %.1f; %d GCs so far; %d goroutines",
		mb(m.RSS), mb(m.RSSFile), mb(m.RSSAnon), mb(m.HeapObjects), mb(m.HeapFree), mb(m.Stacks), mb(m.Runtime), mb(m.HeapReleased), mb(m.HeapGoal), m.GCs, m.Goroutines)
}
