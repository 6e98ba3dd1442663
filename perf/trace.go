package main

import (
	"fmt"
	"os"
	"runtime/trace"
)

// traceEnv, when set to a path prefix, makes the processes write an
// execution trace of the whole run (PREFIX.<role>.trace, the roles named
// as for profileEnv's profiles), for go tool trace: where a paced call's latency
// goes while the CPU idles (scheduler latency, timers, GC, hand-offs).
// Run one point of one path (RPCXBATCH_PERF_ONLY) to keep it small.
const traceEnv = "RPCXBATCH_PERF_TRACE"

// startTrace starts this process's execution trace, if asked for; the
// returned func stops it and closes the file.
func startTrace(role string) (stop func(), err error) {
	prefix := os.Getenv(traceEnv)
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(prefix + "." + role + ".trace")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", traceEnv, err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", traceEnv, err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}
