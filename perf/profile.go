package main

import (
	"os"

	"github.com/rpcxbatch/rpcxbatch/perf/internal/benchkit"
)

// profileEnv, when set to a path prefix, makes both processes write a CPU
// profile of the whole run: PREFIX.client.pprof (the harness, which drives
// the load) and PREFIX.server.pprof. Read them with go tool pprof.
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
