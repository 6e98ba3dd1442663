package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// Config is one invocation of rpcxbench, from its command line.
type Config struct {
	// Addrs are the servers of a static discovery (host:port); Etcd the
	// etcd endpoints of an etcd discovery under BasePath. One of the two.
	Addrs    []string
	Etcd     []string
	BasePath string
	// Service and Method are the call's rpcx service path and method.
	Service, Method string
	// Args is the -args text (or the file it names): JSON, or with
	// SerializeNone the bytes to send as they are.
	Args []byte
	// Serialize is the codec of arguments and replies; SerializeName its
	// name on the command line.
	Serialize     protocol.SerializeType
	SerializeName string
	// Concurrency is the goroutines calling at once, one sweep point each.
	Concurrency []int
	// Duration is each path's time at each concurrency, or Count its calls
	// (Count wins when set); both are divided among the Rounds.
	Duration time.Duration
	Count    int
	Rounds   int
	// Warmup is each path's untimed load before a concurrency's rounds.
	Warmup time.Duration
	// Timeout bounds each call (0: no deadline of its own).
	Timeout time.Duration
	// FailMode and SelectMode are the XClients' (the same for both).
	FailMode   client.FailMode
	SelectMode client.SelectMode
	// JSON is the JSON lines file ("" = none), Figure the picture (an
	// .svg or .png file; "" = none).
	JSON, Figure string
	// Progress prints a line a second to stderr while a run lasts.
	Progress bool
	// Verbose keeps rpcx's own log lines.
	Verbose bool
}

// serializers are the codecs -serialize takes.
var serializers = map[string]protocol.SerializeType{
	"msgpack": protocol.MsgPack,
	"json":    protocol.JSON,
	"none":    protocol.SerializeNone,
}

var failModes = map[string]client.FailMode{
	"failfast": client.Failfast, "failtry": client.Failtry, "failover": client.Failover, "failbackup": client.Failbackup,
}

var selectModes = map[string]client.SelectMode{
	"random": client.RandomSelect, "roundrobin": client.RoundRobin, "weighted": client.WeightedRoundRobin,
	"hash": client.ConsistentHash, "closest": client.Closest,
}

const usageText = `Usage: rpcxbench -addr HOST:PORT -call Service.Method -args JSON [flags]
       rpcxbench -etcd HOST:PORT -base-path /rpcx -call Service.Method -args JSON [flags]

Runs the same call against your running rpcx service over rpcx's XClient
(client.NewXClient) and over rpcxbatch's drop-in (batchclient.NewXClient),
interleaved, at each concurrency; prints a table (calls/s, p50/p99/p99.9,
client CPU per call, errors by kind, drop-in ÷ rpcx), and can write JSON
lines and a figure. A server without the rpcxbatch plugin is reported as
such: the drop-in then runs over plain rpcx, as it would in your service.

The arguments are JSON, encoded without your Go types: objects become
maps (map[string]any), arrays slices, integral numbers int64, other numbers
float64, and that value is encoded with -serialize. So the JSON's field
names must be the names your service's codec decodes: with msgpack, the Go
field names (or their msgpack tags), matched exactly; with json, as
encoding/json matches them. A field the service does not know is dropped
without an error, as the codec drops it. A JSON string goes to a []byte
argument as its bytes with msgpack. With -serialize none, -args is sent as
it is (text, or the file's bytes with @file) and the service's argument
must be a []byte. Replies are decoded into a generic value (none: bytes).
Protobuf is not supported: a protobuf value cannot be built without its
generated type.

Flags:
`

// parseConfig reads the command line. It returns flag.ErrHelp after -h,
// with the usage written to stderr.
func parseConfig(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("rpcxbench", flag.ContinueOnError)
	var c Config
	var addrs, etcd, call, argText, serialize, conc, failMode, selectMode string
	// What to call.
	fs.StringVar(&addrs, "addr", "", "server address(es), host:port, comma-separated (a static discovery)")
	fs.StringVar(&etcd, "etcd", "", "etcd endpoint(s), host:port, comma-separated: discover the servers there instead (rpcx-etcd)")
	fs.StringVar(&c.BasePath, "base-path", "/rpcx", "with -etcd: the rpcx base path the servers register under")
	fs.StringVar(&call, "call", "", "the service and method, Service.Method")
	fs.StringVar(&argText, "args", "{}", "the call's argument as JSON, or @FILE to read it from a file")
	fs.StringVar(&serialize, "serialize", "msgpack", "codec of arguments and replies: msgpack, json or none (raw bytes)")
	// How much load.
	fs.StringVar(&conc, "c", "1,10,100", "concurrency: goroutines calling at once, comma-separated, one point each")
	fs.DurationVar(&c.Duration, "d", 5*time.Second, "time each path runs at each concurrency (split among -rounds)")
	fs.IntVar(&c.Count, "n", 0, "calls each path makes at each concurrency, instead of -d (split among -rounds)")
	fs.IntVar(&c.Rounds, "rounds", 2, "rounds per concurrency, the two paths' order alternating round by round")
	fs.DurationVar(&c.Warmup, "warmup", 250*time.Millisecond, "untimed load on each path before a concurrency's rounds")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Second, "deadline of each call (0: none)")
	fs.StringVar(&failMode, "fail-mode", "failfast", "both XClients' fail mode: failfast, failtry, failover, failbackup")
	fs.StringVar(&selectMode, "select", "random", "both XClients' select mode: random, roundrobin, weighted, hash, closest")
	// Output.
	fs.StringVar(&c.JSON, "json", "", "write JSON lines to this file: one object per concurrency and path")
	fs.StringVar(&c.Figure, "figure", "", "draw calls/s and latency against concurrency into this file (.svg or .png)")
	fs.BoolVar(&c.Progress, "progress", true, "print progress to stderr once a second while a run lasts")
	fs.BoolVar(&c.Verbose, "v", false, "keep rpcx's own log lines (dropped by default)")
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprint(stderr, usageText)
			fs.PrintDefaults()
			return c, err
		}
		return c, fmt.Errorf("%w (rpcxbench -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (rpcxbench -h lists the flags)", fs.Args())
	}

	c.Addrs, c.Etcd = splitList(addrs), splitList(etcd)
	switch {
	case len(c.Addrs) == 0 && len(c.Etcd) == 0:
		return c, errors.New("no server: give -addr host:port (or -etcd host:port with -base-path)")
	case len(c.Addrs) > 0 && len(c.Etcd) > 0:
		return c, errors.New("-addr and -etcd: give one of them")
	}
	i := strings.LastIndexByte(call, '.')
	if i <= 0 || i == len(call)-1 {
		return c, fmt.Errorf("-call %q: want Service.Method", call)
	}
	c.Service, c.Method = call[:i], call[i+1:]
	var ok bool
	if c.Serialize, ok = serializers[serialize]; !ok {
		return c, fmt.Errorf("-serialize %q: msgpack, json or none (protobuf is not supported: it needs the service's generated types)", serialize)
	}
	c.SerializeName = serialize
	var err error
	if c.Args, err = readArgs(argText); err != nil {
		return c, err
	}
	if _, err := argValue(c.Args, c.Serialize); err != nil {
		return c, err
	}
	if c.Concurrency, err = parseInts("-c", conc); err != nil {
		return c, err
	}
	if c.FailMode, ok = failModes[failMode]; !ok {
		return c, fmt.Errorf("-fail-mode %q: failfast, failtry, failover or failbackup", failMode)
	}
	if c.SelectMode, ok = selectModes[selectMode]; !ok {
		return c, fmt.Errorf("-select %q: random, roundrobin, weighted, hash or closest", selectMode)
	}
	switch {
	case c.Rounds < 1:
		return c, fmt.Errorf("-rounds %d: at least 1", c.Rounds)
	case c.Count < 0:
		return c, fmt.Errorf("-n %d: a count of calls is at least 1 (0: use -d)", c.Count)
	case c.Count == 0 && c.Duration <= 0:
		return c, fmt.Errorf("-d %v: a positive duration, or -n", c.Duration)
	case c.Count > 0 && c.Count < c.Rounds:
		return c, fmt.Errorf("-n %d: at least one call per round (-rounds %d)", c.Count, c.Rounds)
	case c.Warmup < 0 || c.Timeout < 0:
		return c, errors.New("-warmup and -timeout must not be negative")
	}
	if c.Figure != "" {
		if ext := strings.ToLower(c.Figure[strings.LastIndexByte(c.Figure, '.')+1:]); ext != "svg" && ext != "png" {
			return c, fmt.Errorf("-figure %q: an .svg or .png file", c.Figure)
		}
	}
	return c, nil
}

// readArgs is -args: the text itself, or the file @FILE names.
func readArgs(s string) ([]byte, error) {
	name, ok := strings.CutPrefix(s, "@")
	if !ok {
		return []byte(s), nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("-args: %w", err)
	}
	return b, nil
}

// splitList is a comma-separated list without its empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseInts reads a comma-separated list of positive integers, each once,
// in increasing order.
func parseInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s %q: positive integers, comma-separated", name, s)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %q: at least one", name, s)
	}
	slices.Sort(out)
	return out, nil
}
