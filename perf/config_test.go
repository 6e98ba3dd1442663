package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDefaults(t *testing.T) {
	c, err := parseConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "sweep", c.Mode)
	require.Len(t, c.Sweeps, 1)
	assert.Equal(t, []string{"call", "go", "cast", "send"}, c.Sweeps[0].Ops)
	assert.Equal(t, []string{"plain", "plainx", "batch", "dropin"}, c.Paths, "every path by default")
	assert.Equal(t, []string{"data"}, c.Sweeps[0].Payloads)
	assert.Equal(t, []int{1, 100, 1000, 10000}, c.Sweeps[0].Writers)
	assert.Equal(t, []int{0}, c.Sweeps[0].PacesMS)
}

func TestParseLists(t *testing.T) {
	c, err := parseConfig([]string{"-ops", "send, call", "-payload", "tiny,binary_1mib", "-writers", "2,10_000",
		"-pace", "0,100", "-messages", "7", "-point-timeout", "3s", "-total-bytes", "64MiB"}, io.Discard)
	require.NoError(t, err)
	s := c.Sweeps[0]
	assert.Equal(t, []string{"send", "call"}, s.Ops)
	assert.Equal(t, []string{"tiny", "binary_1mib"}, s.Payloads)
	assert.Equal(t, []int{2, 10000}, s.Writers)
	assert.Equal(t, []int{0, 100}, s.PacesMS)
	assert.Equal(t, 7, c.Messages)
	assert.Equal(t, 3*time.Second, c.PointTimeout)
	assert.Equal(t, int64(64<<20), c.TotalBytes)
}

func TestParseErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-ops", "call,publish"},
		{"-paths", "plain,rpcx"},
		{"-payload", "huge"},
		{"-writers", "0"},
		{"-writers", "1,x"},
		{"-pace", "-1"},
		{"-mode", "other"},
		{"-preset", "slow"},
		{"-total-bytes", "12XB"},
		{"-netem-delay", "1ms"}, // needs -netns
		{"extra"},
	} {
		_, err := parseConfig(args, io.Discard)
		assert.Error(t, err, "%v", args)
	}
	_, err := parseConfig([]string{"-h"}, io.Discard)
	assert.True(t, errors.Is(err, flag.ErrHelp))
}

func TestPresetQuickAndOverrides(t *testing.T) {
	c, err := parseConfig([]string{"-preset", "quick"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "perf/results/quick.jsonl", c.Out)
	assert.Equal(t, []int{1, 10, 100, 1000, 10000}, c.Sweeps[0].Writers)
	points, skipped := c.Points()
	assert.Len(t, points, 21, "4 ops × 5 writer counts closed loop, and 5,000 writers paced")
	assert.Empty(t, skipped)
	last := points[len(points)-1]
	assert.Equal(t, Point{Op: "call", Payload: "data", Writers: 5000, PaceMS: 100, Messages: 50}, last)

	c, err = parseConfig([]string{"-preset", "quick", "-writers", "5", "-out", "x.jsonl", "-repeat", "3"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, c.Repeat)
	assert.Equal(t, []int{5}, c.Sweeps[0].Writers)
	assert.Equal(t, "x.jsonl", c.Out)
	assert.Equal(t, "perf/results/quick", c.Report)

	c, err = parseConfig([]string{"-preset", "full"}, io.Discard)
	require.NoError(t, err)
	assert.Len(t, c.Sweeps, 2)
}

func TestMessagesPerPoint(t *testing.T) {
	c := Config{TotalOps: 1000, TotalBytes: 1 << 30, MaxInflightBytes: 1 << 30}
	assert.Equal(t, 1000, c.messagesFor(1, 200))
	assert.Equal(t, 4, c.messagesFor(300, 200))  // rounded up
	assert.Equal(t, 1, c.messagesFor(5000, 200)) // at least one each
	c.TotalBytes = 10 << 20
	assert.Equal(t, 10, c.messagesFor(1, 1<<20)) // the byte cap wins
	c.Messages = 3
	assert.Equal(t, 3, c.messagesFor(1000, 1<<20))

	c.Sweeps = []Sweep{{Ops: []string{"call"}, Payloads: []string{"binary_1mib"}, Writers: []int{10, 10000}, PacesMS: []int{0}}}
	points, skipped := c.Points()
	assert.Len(t, points, 1)
	assert.Len(t, skipped, 1)
}

// -paths picks the paths; the run keeps allPaths' order whatever the
// order given.
func TestPathSelection(t *testing.T) {
	c, err := parseConfig([]string{"-paths", "dropin, plainx,dropin"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"plainx", "dropin"}, c.Paths)

	c, err = parseConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, allPaths, c.Paths)
}

// -h lists every flag once, in its group.
func TestHelpGroupsEveryFlag(t *testing.T) {
	var b strings.Builder
	_, err := parseConfig([]string{"-h"}, &b)
	require.ErrorIs(t, err, flag.ErrHelp)
	out := b.String()
	assert.NotContains(t, out, "\nOther:", "every flag is in a group")
	for _, g := range flagGroups {
		assert.Contains(t, out, "\n"+g.title+":\n")
	}
	n := 0
	for _, g := range flagGroups {
		for _, name := range g.flags {
			n++
			assert.Equal(t, 1, strings.Count(out, "\n  -"+name+" ")+strings.Count(out, "\n  -"+name+"\n"), name)
		}
	}
	assert.Equal(t, 22, n, "the harness's flags")
	assert.Contains(t, out, `-out string`+"\n    \tJSON lines output, one object per point and path (\"\" = none) (default \"perf/results/run.jsonl\")")
	assert.Contains(t, out, "-repeat int\n    \truns of every path per point")
	assert.Contains(t, out, "(default 1)")
}

// Every path offers call, go and cast; send only the two that are not an
// XClient.
func TestPathsOffer(t *testing.T) {
	for _, p := range allPaths {
		for _, op := range []string{"call", "go", "cast"} {
			assert.True(t, offers(p, op), "%s %s", p, op)
		}
	}
	assert.True(t, offers(pathPlain, "send"))
	assert.True(t, offers(pathBatch, "send"))
	assert.False(t, offers(pathPlainX, "send"))
	assert.False(t, offers(pathDropin, "send"))
}

func TestPayloadSizes(t *testing.T) {
	assert.InDelta(t, 222, payloads["data"].size, 5, "ecall's data payload is about 225 bytes")
	assert.Less(t, payloads["tiny"].size, 16)
	assert.Greater(t, payloads["binary_1mib"].size, 1<<20)
	assert.Equal(t, []string{"tiny", "data", "binary_10kib", "binary_100kib", "binary_1mib"}, payloadNames())
}

func TestPresetFullPacedCount(t *testing.T) {
	c, err := parseConfig([]string{"-preset", "full"}, io.Discard)
	require.NoError(t, err)
	points, _ := c.Points()
	for _, p := range points {
		if p.PaceMS > 0 {
			assert.Equal(t, 50, p.Messages, "paced points run a fixed count per writer")
		}
	}
	assert.Len(t, points, 112, "100 closed-loop points less 4 skipped (1 MiB × 10,000 writers), 16 paced")
}

func TestMaxPerWriter(t *testing.T) {
	c := Config{TotalOps: 200000, MaxPerWriter: 15000, TotalBytes: 1 << 30}
	assert.Equal(t, 15000, c.messagesFor(1, 220))
	assert.Equal(t, 2000, c.messagesFor(100, 220))
	assert.Equal(t, 200, c.messagesFor(1000, 220))
	c.MaxPerWriter = 0
	assert.Equal(t, 200000, c.messagesFor(1, 220))
}

// Each path's fraction is taken against the ceiling of the codec it
// spends its codec time in: the batch path's for batch calls and casts,
// rpcx's for the plain path and for sends (whose bytes the harness encodes
// with rpcx's codec on both paths).
func TestCeilingFractionByCodec(t *testing.T) {
	cs := []Ceiling{
		{Payload: "data", Codec: codecRPCX, CallsPerS: 100, OnewayPerS: 200},
		{Payload: "data", Codec: codecBatch, CallsPerS: 400, OnewayPerS: 800},
	}
	for _, tc := range []struct {
		op, path string
		want     float64
	}{
		{"call", pathPlain, 0.5}, {"cast", pathPlain, 0.25}, {"send", pathPlain, 0.25},
		{"call", pathBatch, 0.125}, {"cast", pathBatch, 0.0625}, {"send", pathBatch, 0.25},
		{"go", pathPlainX, 0.5}, {"cast", pathPlainX, 0.25},
		{"go", pathDropin, 0.125}, {"cast", pathDropin, 0.0625},
	} {
		f, ok := ceilingFraction(Result{Op: tc.op, Path: tc.path, Payload: "data", OpsPerS: 50}, cs)
		require.True(t, ok, "%s %s", tc.op, tc.path)
		require.InDelta(t, tc.want, f, 1e-9, "%s %s", tc.op, tc.path)
	}
	_, ok := ceilingFraction(Result{Op: "call", Path: pathBatch, Payload: "tiny", OpsPerS: 1}, cs)
	require.False(t, ok)
}

// -repeat is the runs of every path per point: 1 by default and in the
// presets (quick takes minutes already), what the flag says otherwise,
// and at least 1.
func TestParseRepeat(t *testing.T) {
	c, err := parseConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Repeat)
	c, err = parseConfig([]string{"-repeat", "3"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, c.Repeat)
	c, err = parseConfig([]string{"-preset", "quick"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Repeat, "make perf-quick keeps single runs")
	c, err = parseConfig([]string{"-preset", "quick", "-repeat", "5"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5, c.Repeat, "the flag wins over the preset")
	for _, v := range []string{"0", "-1", "x"} {
		_, err := parseConfig([]string{"-repeat", v}, io.Discard)
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "repeat", v)
	}
}
