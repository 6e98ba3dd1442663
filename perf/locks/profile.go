package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// profileEnv, when set to a path prefix, makes every node write a CPU
// profile of each point it runs, from GO to its result:
// PREFIX.d<design>-<engine>-n<node>.pprof. Read them with go tool pprof.
const profileEnv = "RPCXBATCH_LOCKS_CPUPROFILE"

// allocProfileEnv, when set to a path prefix, makes every node write its
// allocation profile at GO and at its result:
// PREFIX.d<design>-<engine>-n<node>.{go,end}.pprof. The point's own
// allocations are their difference:
// go tool pprof -sample_index=alloc_space -diff_base X.go.pprof X.end.pprof.
const allocProfileEnv = "RPCXBATCH_LOCKS_ALLOCPROFILE"

// startProfile starts the CPU and allocation profiles of a point, if
// asked for; the returned func stops them and writes them out.
func startProfile(sp Spec) (stop func(), err error) {
	name := fmt.Sprintf("d%d-%s-n%d", sp.Design, strings.ReplaceAll(sp.Engine, " ", "-"), sp.NodeID)
	stopCPU := func() {}
	if prefix := os.Getenv(profileEnv); prefix != "" {
		if stopCPU, err = benchkit.StartCPUProfile(profileEnv, prefix+"."+name+".pprof"); err != nil {
			return nil, err
		}
	}
	prefix := os.Getenv(allocProfileEnv)
	if prefix == "" {
		return stopCPU, nil
	}
	if err := writeAllocs(prefix + "." + name + ".go.pprof"); err != nil {
		stopCPU()
		return nil, err
	}
	return func() {
		stopCPU()
		if err := writeAllocs(prefix + "." + name + ".end.pprof"); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}, nil
}

// writeAllocs writes the allocation profile so far to file.
func writeAllocs(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("%s: %w", allocProfileEnv, err)
	}
	defer f.Close()
	// The profile shows the allocations up to the last GC: make it now.
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return fmt.Errorf("%s: %w", allocProfileEnv, err)
	}
	return nil
}
