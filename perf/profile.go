package main

import (
	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// profileEnv carries -cpuprofile's file to a server process: the harness
// sets it to PREFIX.server-<path>.pprof. A client process reads its own
// from the Config it is given (PREFIX.client-<path>.pprof).
const profileEnv = "RPCXBATCH_PERF_PROFILE"

// profiled runs f under a CPU profile written to file (go tool pprof),
// or without one when file is "".
func profiled(file string, f func() error) error {
	if file == "" {
		return f()
	}
	stop, err := benchkit.StartCPUProfile("-cpuprofile", file)
	if err != nil {
		return err
	}
	defer stop()
	return f()
}

// profileFile is the file of role's profile under -cpuprofile's prefix,
// "" without one.
func profileFile(prefix, role string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "." + role + ".pprof"
}
