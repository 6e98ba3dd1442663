// Command rpcxbench measures what rpcxbatch would do for your rpcx
// service: it runs the same call against your running server over rpcx's
// XClient (client.NewXClient) and over rpcxbatch's drop-in
// (batchclient.NewXClient), side by side and interleaved, at each
// concurrency you name, and prints a table a person reads at a glance:
// calls per second, p50, p99 and p99.9 latency, the client's CPU per
// call, errors by kind and the drop-in ÷ rpcx ratio. It can write JSON
// lines (-json) and draw calls per second and latency against concurrency
// (-figure, SVG or PNG).
//
//	go run github.com/rpcxbatch/rpcxbatch/cmd/rpcxbench@latest \
//	    -addr 127.0.0.1:8972 -call Arith.Mul -args '{"A": 7, "B": 8}' -c 1,10,100,1000 -d 10s
//
// The servers come from -addr (a static list) or from etcd (-etcd,
// -base-path), as rpcx's discoveries give them. A server without the
// rpcxbatch plugin is reported as such, and the drop-in falls back to
// plain rpcx there, as it would in your service.
//
// It does not know your Go types: -args is JSON, decoded into maps,
// slices, int64, float64 and strings and encoded with the codec
// -serialize names (msgpack, json, or none for raw bytes), so its field
// names must be those your service's codec decodes; replies are decoded
// into a generic value. rpcxbench -h says more.
//
// Bad input (no such service or method, arguments that are not JSON, a
// server that is down) ends it with one line on stderr and exit status 1
// (2 for a bad command line).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT and SIGTERM end the load; the deferred closes then run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli runs one command line and returns the exit status: 0, 1 when the
// run failed, 2 when the command line is wrong. An error is one line on
// stderr.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rpcxbench:", oneLine(err.Error()))
		return 2
	}
	if err := run(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "rpcxbench:", oneLine(err.Error()))
		return 1
	}
	return 0
}
