package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is one invocation of the harness, from the command line.
type Config struct {
	// Mode is "sweep" (the measurement, with the codec ceiling) or "codec"
	// (only the codec ceiling).
	Mode string
	// Preset names the defaults applied ("quick", "full" or "").
	Preset string
	// Paths are the paths each point runs over (allPaths' names), in
	// allPaths' order.
	Paths []string
	// Sweeps are the point grids to run, in order.
	Sweeps []Sweep
	// Messages is the operations per writer; 0 derives it per point from
	// TotalOps and TotalBytes.
	Messages int
	// TotalOps is the operations a point aims at when Messages is 0.
	TotalOps int
	// MaxPerWriter caps the operations per writer when Messages is 0
	// (0: no cap), so that the points with few writers stay short.
	MaxPerWriter int
	// TotalBytes caps the payload bytes a point moves when Messages is 0, so
	// that the large profiles do not take minutes.
	TotalBytes int64
	// MaxInflightBytes skips points whose writers × payload exceeds it:
	// 10,000 writers with 1 MiB each is 10 GB before anything is sent.
	MaxInflightBytes int64
	// PointTimeout bounds one path of one point, submit and drain.
	PointTimeout time.Duration
	// Warmup is the operations run on a fresh client before a point.
	Warmup int
	// Repeat is how many times each point runs every path, in rounds
	// whose path order alternates (roundOrder); the table and report give
	// each path's medians over them (aggregate). 1 by default.
	Repeat int
	// Out is the JSON lines file ("" = none); Report the report folder.
	Out, Report string
	// CodecDuration is how long the codec ceiling measures each payload.
	CodecDuration time.Duration
	// Progress turns the once-a-second progress lines on stderr on.
	Progress bool
	// CPUProfile, when set, is the prefix of the CPU profiles each
	// process writes: PREFIX.client-<path>.pprof and
	// PREFIX.server-<path>.pprof (profile.go).
	CPUProfile string
	// Netns, when set, runs the server in its own network namespace joined
	// by a veth pair (root only); NetemRate and NetemDelay shape that link.
	Netns                 bool
	NetemRate, NetemDelay string
}

// Sweep is a grid of points: every payload × pace × writer count × op.
type Sweep struct {
	Ops      []string
	Payloads []string
	Writers  []int
	PacesMS  []int
	// Messages, when set, is the operations per writer of this sweep's
	// points (a paced sweep needs a count, not a total); -messages wins.
	Messages int
}

// Point is one measured configuration; each runs once per path, or
// Config.Repeat times with -repeat.
type Point struct {
	Op       string
	Payload  string
	Writers  int
	PaceMS   int
	Messages int // per writer
}

// allOps are the operations: call (a call and its reply), go (the same
// call made with Go, waited for on its Done channel), cast (oneway) and
// send (a send handler's bytes; the XClient paths have none).
var allOps = []string{"call", "go", "cast", "send"}

// presets are the named defaults: flags given on the command line win.
var presets = map[string]func(c *Config){
	// quick is `make perf-quick`: the four paths over the closed loop at 1
	// to 10,000 writers, then 5,000 writers paced at 100 ms.
	"quick": func(c *Config) {
		// Points long enough (200,000 operations) that warm-up effects
		// (pools, buffers, GC pacing) do not dominate; a single writer
		// stops at 15,000 so that its slow calls fit the time.
		c.Sweeps = []Sweep{
			{Ops: allOps, Payloads: []string{"data"}, Writers: []int{1, 10, 100, 1000, 10000}, PacesMS: []int{0}},
			// ecall's paced case: does each path keep the intended rate?
			{Ops: []string{"call"}, Payloads: []string{"data"}, Writers: []int{5000}, PacesMS: []int{100}, Messages: 50},
		}
		c.TotalOps, c.MaxPerWriter, c.PointTimeout, c.CodecDuration = 200000, 15000, 15*time.Second, time.Second
		c.Out, c.Report = "perf/results/quick.jsonl", "perf/results/quick"
	},
	// full is `make perf`: every payload closed loop, then the data payload
	// paced at 100 ms per writer as in ecall's tables.
	"full": func(c *Config) {
		c.Sweeps = []Sweep{
			{Ops: allOps, Payloads: payloadNames(), Writers: []int{1, 10, 100, 1000, 10000}, PacesMS: []int{0}},
			{Ops: allOps, Payloads: []string{"data"}, Writers: []int{100, 1000, 10000, 30000}, PacesMS: []int{100}, Messages: 50},
		}
		c.TotalOps, c.PointTimeout, c.CodecDuration = 150000, 60*time.Second, 2*time.Second
		c.Out, c.Report = "perf/results/full.jsonl", "perf/results/full"
	},
}

// parseConfig reads the command line. It returns flag.ErrHelp after -h.
func parseConfig(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	var ops, payloads, writers, paces, paths string
	// What to run.
	fs.StringVar(&c.Preset, "preset", "", "defaults to start from: quick (make perf-quick) or full (make perf); other flags override")
	fs.StringVar(&c.Mode, "mode", "sweep", "sweep: the points over every path, then the report; codec: only the codec ceiling")
	fs.StringVar(&paths, "paths", strings.Join(allPaths, ","), "paths, comma-separated: plain (rpcx's Client), plainx (rpcx's XClient), batch (batchclient.Client), dropin (batchclient.NewXClient)")
	fs.StringVar(&ops, "ops", strings.Join(allOps, ","), "operations, comma-separated: "+strings.Join(allOps, ", "))
	fs.StringVar(&payloads, "payload", "data", "payload profiles, comma-separated: "+strings.Join(payloadNames(), ", "))
	fs.StringVar(&writers, "writers", "1,100,1000,10000", "writer counts, comma-separated")
	fs.StringVar(&paces, "pace", "0", "pause in ms between two operations of one writer, comma-separated; 0 = closed loop")
	// How much of it.
	fs.IntVar(&c.Messages, "messages", 0, "operations per writer; 0 = -total-ops divided by the writers (at least 1)")
	fs.IntVar(&c.TotalOps, "total-ops", 40000, "operations per point when -messages is 0")
	var totalBytes, inflight string
	fs.StringVar(&totalBytes, "total-bytes", "1GiB", "payload bytes per point at most when -messages is 0")
	fs.StringVar(&inflight, "max-inflight", "2GiB", "skip points whose writers × payload exceed this")
	fs.IntVar(&c.Repeat, "repeat", 1, "runs of every path per point, in rounds of alternating path order; the table and report give each path's medians and each ratio per round")
	fs.IntVar(&c.Warmup, "warmup", 200, "operations on a fresh client before each measured run")
	fs.DurationVar(&c.PointTimeout, "point-timeout", 30*time.Second, "bound on one path of one point; a point that hits it reports bounded=true")
	fs.DurationVar(&c.CodecDuration, "codec-duration", 2*time.Second, "time the codec ceiling measures each payload")
	// Output.
	fs.StringVar(&c.Out, "out", "perf/results/run.jsonl", "JSON lines output, one object per point and path (\"\" = none)")
	fs.StringVar(&c.Report, "report", "perf/results/run", "report folder: report.md and the figures (\"\" = none)")
	fs.BoolVar(&c.Progress, "progress", true, "print progress to stderr once a second while a point runs")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write each process's CPU profile: PREFIX.client-<path>.pprof and PREFIX.server-<path>.pprof (go tool pprof)")
	// The link.
	fs.BoolVar(&c.Netns, "netns", false, "root only: server in its own network namespace over a veth pair")
	fs.StringVar(&c.NetemRate, "netem-rate", "", "with -netns: tc netem rate on the veth pair, e.g. 1gbit")
	fs.StringVar(&c.NetemDelay, "netem-delay", "", "with -netns: tc netem delay each way, e.g. 100us")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./perf [flags]\n\n"+
			"Runs each point (op × payload × pace × writers) over each path (plain\n"+
			"rpcx's Client and XClient, rpcxbatch's Client and drop-in XClient),\n"+
			"each path from a client process of its own against a server process\n"+
			"of its own, prints a table, writes JSON lines and a report folder\n"+
			"with figures. To measure your own service instead: go run ./cmd/rpcxbench -h.\n")
		printGrouped(fs, flagGroups)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	sw := Sweep{}
	if sw.Ops, err = parseOps(ops); err != nil {
		return c, err
	}
	if c.Paths, err = parsePaths(paths); err != nil {
		return c, err
	}
	if sw.Payloads, err = parsePayloads(payloads); err != nil {
		return c, err
	}
	if sw.Writers, err = parseInts("writers", writers, 1); err != nil {
		return c, err
	}
	if sw.PacesMS, err = parseInts("pace", paces, 0); err != nil {
		return c, err
	}
	if c.TotalBytes, err = parseBytes(totalBytes); err != nil {
		return c, fmt.Errorf("-total-bytes: %w", err)
	}
	if c.MaxInflightBytes, err = parseBytes(inflight); err != nil {
		return c, fmt.Errorf("-max-inflight: %w", err)
	}
	c.Sweeps = []Sweep{sw}
	if c.Preset != "" {
		apply, ok := presets[c.Preset]
		if !ok {
			return c, fmt.Errorf("unknown -preset %q (quick, full)", c.Preset)
		}
		explicit := c
		apply(&c)
		// A flag given on the command line wins over the preset.
		for name, keep := range map[string]func(){
			"total-ops":      func() { c.TotalOps = explicit.TotalOps },
			"point-timeout":  func() { c.PointTimeout = explicit.PointTimeout },
			"codec-duration": func() { c.CodecDuration = explicit.CodecDuration },
			"out":            func() { c.Out = explicit.Out },
			"report":         func() { c.Report = explicit.Report },
			"repeat":         func() { c.Repeat = explicit.Repeat },
		} {
			if set[name] {
				keep()
			}
		}
		for i := range c.Sweeps {
			s := &c.Sweeps[i]
			if set["ops"] {
				s.Ops = sw.Ops
			}
			if set["payload"] {
				s.Payloads = sw.Payloads
			}
			if set["writers"] {
				s.Writers = sw.Writers
			}
			if set["pace"] {
				s.PacesMS = sw.PacesMS
			}
		}
	}
	return c, c.validate()
}

func (c Config) validate() error {
	switch {
	case c.Mode != "sweep" && c.Mode != "codec":
		return fmt.Errorf("unknown -mode %q (sweep, codec)", c.Mode)
	case c.Messages < 0 || c.TotalOps < 1:
		return errors.New("-messages must be >= 0 and -total-ops >= 1")
	case c.PointTimeout <= 0 || c.CodecDuration <= 0:
		return errors.New("-point-timeout and -codec-duration must be positive")
	case c.Warmup < 0:
		return errors.New("-warmup must be >= 0")
	case c.Repeat < 1:
		return fmt.Errorf("-repeat %d: each point must run at least once (-repeat 1, the default, is a single run)", c.Repeat)
	case !c.Netns && (c.NetemRate != "" || c.NetemDelay != ""):
		return errors.New("-netem-rate and -netem-delay need -netns")
	}
	return nil
}

// Points expands the sweeps into points, in run order, and the skipped ones
// with the reason.
func (c Config) Points() (points []Point, skipped []string) {
	for _, s := range c.Sweeps {
		for _, pl := range s.Payloads {
			size := int64(payloads[pl].size)
			for _, pace := range s.PacesMS {
				for _, w := range s.Writers {
					if int64(w)*size > c.MaxInflightBytes {
						skipped = append(skipped, fmt.Sprintf("%s w=%d: %d writers × %d B exceed -max-inflight", pl, w, w, size))
						continue
					}
					m := c.messagesFor(w, size)
					if s.Messages > 0 && c.Messages == 0 {
						m = s.Messages
					}
					for _, op := range s.Ops {
						points = append(points, Point{Op: op, Payload: pl, Writers: w, PaceMS: pace, Messages: m})
					}
				}
			}
		}
	}
	return points, skipped
}

// messagesFor is the operations per writer of a point: -messages, or the
// total divided among the writers, at least one each and at most
// MaxPerWriter.
func (c Config) messagesFor(writers int, payloadBytes int64) int {
	if c.Messages > 0 {
		return c.Messages
	}
	total := int64(c.TotalOps)
	if payloadBytes > 0 && c.TotalBytes/payloadBytes < total {
		total = c.TotalBytes / payloadBytes
	}
	n := int(max(1, (total+int64(writers)-1)/int64(writers)))
	if c.MaxPerWriter > 0 {
		n = min(n, c.MaxPerWriter)
	}
	return n
}

func parseOps(s string) ([]string, error) {
	return parseNames("-ops", "operation", s, allOps)
}

// parsePaths reads -paths; the run keeps allPaths' order, whatever the
// order given.
func parsePaths(s string) ([]string, error) {
	out, err := parseNames("-paths", "path", s, allPaths)
	slices.SortFunc(out, func(a, b string) int { return slices.Index(allPaths, a) - slices.Index(allPaths, b) })
	return out, err
}

func parsePayloads(s string) ([]string, error) {
	return parseNames("-payload", "profile", s, payloadNames())
}

// parseNames reads the comma-separated list s of names from known, each
// kept once, in the order given; flag and what name them in errors.
func parseNames(flag, what, s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("%s: unknown %s %q (%s)", flag, what, f, strings.Join(known, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// parseInts reads a comma-separated list of integers >= min; "1,000" style
// thousands separators are not accepted (the comma separates values), but
// "10_000" is.
func parseInts(name, s string, min int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 0, 64)
		if err != nil {
			return nil, fmt.Errorf("-%s: %w", name, err)
		}
		if n < int64(min) {
			return nil, fmt.Errorf("-%s: %d is below %d", name, n, min)
		}
		out = append(out, int(n))
	}
	return out, nil
}

// parseBytes reads sizes like 512, 64KiB, 1MiB, 2GiB.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("size %q must be positive", s)
	}
	return n * mult, nil
}

// flagGroups are -h's sections, each with its flags in order.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"What to run", []string{"preset", "mode", "paths", "ops", "payload", "writers", "pace"}},
	{"How much of it", []string{"messages", "total-ops", "total-bytes", "max-inflight", "repeat", "warmup", "point-timeout", "codec-duration"}},
	{"Output", []string{"out", "report", "progress", "cpuprofile"}},
	{"The link (root only)", []string{"netns", "netem-rate", "netem-delay"}},
}

// printGrouped prints fs's flags as PrintDefaults does, in groups; a
// flag no group names comes last, so that none is left out.
func printGrouped(fs *flag.FlagSet, groups []struct {
	title string
	flags []string
}) {
	w := fs.Output()
	listed := map[string]bool{}
	print := func(f *flag.Flag) {
		listed[f.Name] = true
		name, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		def := ""
		switch {
		case f.DefValue == "" || name != "string" && (f.DefValue == "0" || f.DefValue == "false" || f.DefValue == "0s"):
		case name == "string":
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		default:
			def = fmt.Sprintf(" (default %v)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n    \t%s%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"), def)
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				print(f)
			}
		}
	}
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if listed[f.Name] {
			return
		}
		if first {
			fmt.Fprintf(w, "\nOther:\n")
			first = false
		}
		print(f)
	})
}
