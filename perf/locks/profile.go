package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
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
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
