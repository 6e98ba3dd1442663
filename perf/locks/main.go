// Command locks runs elock's benchmark designs against package lock: two
// lock node processes on loopback, each with its own client goroutines,
// and the same lock code with its cross-node traffic over rpcxbatch and
// over plain rpcx side by side, and etcd's concurrency.Mutex for design 1.
//
//	go run ./perf/locks -h
//	go run ./perf/locks                  # what `make locks-bench` runs
//	go run ./perf/locks -preset quick    # what `make locks-bench-quick` runs
//
// The same binary is the node: the harness re-executes itself with
// roleEnv set (see node.go). Results go to a JSON file (one object per
// point and repeat) and a report folder (report.md and locks.svg).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const (
	roleEnv      = "RPCXBATCH_LOCKS_ROLE"
	transportEnv = "RPCXBATCH_LOCKS_TRANSPORT"
	timeoutEnv   = "RPCXBATCH_LOCKS_NODE_TIMEOUT"
	roleNode     = "node"
)

// The engines a point runs on.
const (
	engineBatch = "rpcxbatch"  // package lock, cross-node traffic over rpcxbatch
	enginePlain = "plain rpcx" // package lock, cross-node traffic over plain rpcx
	engineLocal = "local"      // package lock, no cross-node traffic (design 4)
	engineEtcd  = "etcd"       // etcd's concurrency.Mutex (design 1)
	// engineInproc is package lock with both nodes in one process,
	// calling each other's lock service directly (inproc.go): what the
	// lock layer and its clients cost without a transport. A bound on
	// what any transport can reach (design 1), not a competitor.
	engineInproc = "in-process"
)

func main() {
	if os.Getenv(roleEnv) == roleNode {
		nt, _ := time.ParseDuration(os.Getenv(timeoutEnv))
		if err := runNode(os.Stdin, os.Stdout, os.Getenv(transportEnv), nt); err != nil {
			fmt.Fprintln(os.Stderr, "locks node:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseConfig(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "locks:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "locks:", err)
		stop()
		os.Exit(1)
	}
}
