package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// profileEnv, when set to a path prefix, makes the processes write a CPU
// profile of the whole run: PREFIX.client-<path>.pprof from each path's
// client process, which drives its load, PREFIX.client.pprof from the
// harness (the load itself with -shared-client, and the after-load
// bursts), and PREFIX.server-<path>.pprof from each path's server
// (PREFIX.server.pprof with -shared-server). Read them with go tool pprof.
const profileEnv = "RPCXBATCH_PERF_CPUPROFILE"

// startCPUProfile starts the CPU profile of this process's role, if asked
// for; the returned func stops it and writes it out.
func startCPUProfile(role string) (stop func(), err error) {
	prefix := os.Getenv(profileEnv)
	if prefix == "" {
		return func() {}, nil
	}
	return benchkit.StartCPUProfile(profileEnv, prefix+"."+role+".pprof")
}

// heapProfileEnv, when set to a path prefix, makes the harness write the
// client process's heap profile after each path's wait after the load
// (PREFIX.<path>.heap.pprof, after a collection so that it shows what is
// live): what the memory left behind is made of.
const heapProfileEnv = "RPCXBATCH_PERF_HEAPPROFILE"

// writeHeapProfile writes it, if asked for.
func writeHeapProfile(path string) error {
	prefix := os.Getenv(heapProfileEnv)
	if prefix == "" {
		return nil
	}
	f, err := os.Create(prefix + "." + path + ".heap.pprof")
	if err != nil {
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	return nil
}
