package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/rpcxbatch/rpcxbatch/perf/internal/benchkit"
)

// profileEnv, when set to a path prefix, makes every node write a CPU
// profile of each point it runs, from GO to its result:
// PREFIX.d<design>-<engine>-n<node>.pprof. Read them with go tool pprof.
const profileEnv = "RPCXBATCH_LOCKS_CPUPROFILE"

// startProfile starts the CPU profile of a point, if asked for; the
// returned func stops it and writes it out.
func startProfile(sp Spec) (stop func(), err error) {
	prefix := os.Getenv(profileEnv)
	if prefix == "" {
		return func() {}, nil
	}
	name := fmt.Sprintf("%s.d%d-%s-n%d.pprof", prefix, sp.Design, strings.ReplaceAll(sp.Engine, " ", "-"), sp.NodeID)
	return benchkit.StartCPUProfile(profileEnv, name)
}
