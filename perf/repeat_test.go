package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Within a point the rounds alternate the paths' order, and so do the
// points' first rounds: no path always goes first or after the same one.
func TestRoundOrder(t *testing.T) {
	paths := []string{"plain", "batch", "dropin"}
	assert.Equal(t, []string{"plain", "batch", "dropin"}, roundOrder(paths, 0, 0))
	assert.Equal(t, []string{"dropin", "batch", "plain"}, roundOrder(paths, 0, 1))
	assert.Equal(t, []string{"plain", "batch", "dropin"}, roundOrder(paths, 0, 2))
	assert.Equal(t, []string{"dropin", "batch", "plain"}, roundOrder(paths, 1, 0))
	assert.Equal(t, []string{"plain", "batch", "dropin"}, roundOrder(paths, 1, 1))
	assert.Equal(t, []string{"plain", "batch", "dropin"}, paths, "the caller's slice stays as it was")
}

// synthRun is a synthetic run of round r with ops/s and the three CPUs per
// operation.
func synthRun(r int, ops, client, server float64) Result {
	return Result{Path: pathBatch, Repeat: r, Repeats: 0, OpsPerS: ops, Ops: int64(ops),
		ClientCPUusPerOp: ptr(client), ServerCPUusPerOp: ptr(server), CPUusPerOp: ptr(client + server)}
}

// The aggregate of an odd count: the run of median ops/s stands for the
// others, each CPU metric is its own median (here from other runs than
// the median-throughput one), the spread and every round's ops/s are kept,
// errors summed, bounded if any run was.
func TestAggregateOddCount(t *testing.T) {
	runs := []Result{synthRun(0, 200, 6.0, 9.0), synthRun(1, 180, 5.5, 11.0), synthRun(2, 221, 6.7, 10.0)}
	runs[1].Errors, runs[1].FirstError = 2, "boom"
	runs[2].Bounded = true
	agg := aggregate(runs)
	assert.True(t, agg.Aggregate)
	assert.Equal(t, 3, agg.Repeats)
	assert.Equal(t, 0, agg.Repeat, "the median run is round 0")
	assert.EqualValues(t, 200, agg.Ops, "the median run's own fields")
	assert.Equal(t, 200.0, agg.OpsPerS)
	assert.Equal(t, []float64{200, 180, 221}, agg.OpsPerSRuns, "round order")
	require.NotNil(t, agg.OpsPerSMin)
	require.NotNil(t, agg.OpsPerSMax)
	assert.Equal(t, 180.0, *agg.OpsPerSMin)
	assert.Equal(t, 221.0, *agg.OpsPerSMax)
	assert.Equal(t, 6.0, *agg.ClientCPUusPerOp)
	assert.Equal(t, 5.5, *agg.ClientCPUusPerOpMin)
	assert.Equal(t, 6.7, *agg.ClientCPUusPerOpMax)
	assert.Equal(t, 10.0, *agg.ServerCPUusPerOp, "the server's median comes from round 2")
	assert.InDelta(t, 16.5, *agg.CPUusPerOp, 1e-9, "the total's own median (16.5 of 15, 16.5, 16.7), not a sum of medians")
	assert.EqualValues(t, 2, agg.Errors)
	assert.Equal(t, "boom", agg.FirstError)
	assert.True(t, agg.Bounded)
	assert.Equal(t, 200.0, runs[0].OpsPerS, "the runs are left as they were")
	assert.Nil(t, runs[0].OpsPerSRuns)
}

// An even count takes the lower of the middle two, for the representative
// run and for each metric; a metric missing in some runs (null) is the
// median of the others, and null when missing in all; a paced point's
// share of the intended rate follows the median ops/s.
func TestAggregateEvenCount(t *testing.T) {
	runs := []Result{synthRun(0, 400, 4, 1), synthRun(1, 100, 1, 4), synthRun(2, 300, 3, 2), synthRun(3, 200, 2, 3)}
	for i := range runs {
		runs[i].ServerCPUusPerOp = nil
		runs[i].CPUusPerOp = ptr([]float64{5, 9, 3, 7}[i])
		runs[i].IntendedPerS = ptr(1000)
		runs[i].PctIntended = ptr(runs[i].OpsPerS / 10)
		runs[i].P99us = ptr(float64(i))
	}
	runs[2].ClientCPUusPerOp = nil
	agg := aggregate(runs)
	assert.Equal(t, 4, agg.Repeats)
	assert.Equal(t, 3, agg.Repeat, "the lower middle of 100, 200, 300, 400 is round 3's 200")
	assert.Equal(t, 200.0, agg.OpsPerS)
	assert.Equal(t, 3.0, *agg.P99us, "the median run's latency")
	assert.Equal(t, 2.0, *agg.ClientCPUusPerOp, "lower middle of 1, 2, 4")
	assert.Nil(t, agg.ServerCPUusPerOp, "unknown in every run")
	assert.Equal(t, 5.0, *agg.CPUusPerOp, "lower middle of 3, 5, 7, 9 (round 0's), not the median run's 7")
	assert.Equal(t, 20.0, *agg.PctIntended)
	assert.False(t, agg.Bounded)
}

// A single run is its own aggregate, unmarked, and makes no round notes.
func TestAggregateSingleRun(t *testing.T) {
	r := synthRun(0, 100, 1, 1)
	agg := aggregate([]Result{r})
	assert.Equal(t, r, agg)
	assert.False(t, agg.Aggregate)
	assert.Empty(t, roundRatioNotes(map[string]Result{pathBatch: agg, pathDropin: agg}))
}

// The round notes divide the same round's runs, for each ratio the table
// gives whose two paths ran.
func TestRoundRatioNotes(t *testing.T) {
	batch := aggregate([]Result{synthRun(0, 100, 1, 1), synthRun(1, 200, 1, 1), synthRun(2, 400, 1, 1)})
	dropin := aggregate([]Result{synthRun(0, 97, 1, 1), synthRun(1, 204, 1, 1), synthRun(2, 380, 1, 1)})
	got := map[string]Result{pathBatch: batch, pathDropin: dropin}
	assert.Equal(t, []string{"d÷batch per round 0.97 1.02 0.95"}, roundRatioNotes(got))
	plain := aggregate([]Result{synthRun(0, 50, 1, 1), synthRun(1, 50, 1, 1), synthRun(2, 100, 1, 1)})
	got[pathPlain] = plain
	assert.Equal(t, []string{"b÷plain per round 2.00 4.00 4.00", "d÷batch per round 0.97 1.02 0.95"}, roundRatioNotes(got))
}
