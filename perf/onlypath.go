package main

import "os"

// onlyPathEnv, when set to "plain" or "batch", runs only that path of each
// point: for a CPU profile (see profileEnv) of one path alone, since both
// processes serve both paths in turn and a whole-run profile mixes them.
// The table then shows zeros for the path left out.
const onlyPathEnv = "RPCXBATCH_PERF_ONLY"

// skipPath reports whether path is left out of this run.
func skipPath(path string) bool {
	only := os.Getenv(onlyPathEnv)
	return only != "" && only != path
}
