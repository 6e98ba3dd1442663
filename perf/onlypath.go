package main

import (
	"os"
	"slices"
	"strings"
)

// onlyPathEnv, when set to a comma list of paths ("batch", "dropin,batch"),
// runs only those paths of each point: for a CPU profile (see profileEnv)
// of one path alone with -shared-client, where a whole-run profile of the
// harness's process mixes every path (a client process per path, the
// default, writes a profile per path anyway), or to leave the other
// paths' servers idle. The table then shows "-" for the paths left out.
const onlyPathEnv = "RPCXBATCH_PERF_ONLY"

// onlyPaths is onlyPathEnv's list, nil when it is not set.
func onlyPaths() []string {
	var out []string
	for _, f := range strings.Split(os.Getenv(onlyPathEnv), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// runPaths are the paths this run measures, in allPaths order: those of
// -paths, less those onlyPathEnv leaves out.
func (c Config) runPaths() []string {
	only := onlyPaths()
	var out []string
	for _, p := range allPaths {
		if slices.Contains(c.Paths, p) && (only == nil || slices.Contains(only, p)) {
			out = append(out, p)
		}
	}
	return out
}
