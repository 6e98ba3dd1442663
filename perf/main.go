// Command perf measures plain rpcx against rpcxbatch side by side, as the
// ecall README measures native Erlang distribution against ecall: N writers
// in a client process of the path's own drive send, cast or call against a
// server in its own process, and every point runs every path back to back
// so each ratio comes from one run.
//
//	go run ./perf -h
//	go run ./perf -preset quick      # what `make perf-quick` runs
//	go run ./perf -mode codec        # only the codec ceiling
//
// To measure your own service instead, see cmd/rpcxbench.
//
// The same binary is the server and, one per path, the client process
// that drives the load: the harness re-executes itself with roleEnv set
// (see server.go and clientproc.go), so nothing has to be built or
// started by hand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getenv(roleEnv) == roleServer {
		if err := profiled(os.Getenv(profileEnv), func() error { return runServer(os.Getenv(listenEnv)) }); err != nil {
			fmt.Fprintln(os.Stderr, "perf server:", err)
			os.Exit(1)
		}
		return
	}
	// SIGINT and SIGTERM cancel the run; the deferred cleanups then stop
	// the processes the run started and remove a network namespace, if
	// any.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv(roleEnv) == roleClient {
		if err := runClient(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "perf client:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		stop()
		os.Exit(1)
	}
}
