package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// With -repeat N, each point runs every path N times in rounds, and the
// table and report give per path one aggregate of the N runs (see Result's
// Repeat, Repeats and Aggregate). A ratio between paths taken from single
// runs on a noisy machine moves by a quarter from run to run; the median
// of interleaved runs, with the ratio of each round beside it, says how
// much of a difference is the paths'.

// roundOrder is the order the paths run in round r of point i: forward
// when i+r is even, reversed otherwise, so that no path always goes first
// or always follows the same other path, within a point and from one
// point to the next.
func roundOrder(paths []string, i, r int) []string {
	order := slices.Clone(paths)
	if (i+r)%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// aggregate is one path's runs of one point, in round order, as one
// Result: the run of median throughput (for an even count the lower of the
// middle two) stands for them, with ops/s and the CPU per operation
// replaced by each one's own median over the runs, the spread of ops/s and
// client CPU, every round's ops/s, the errors summed and bounded if any run
// was. One run is returned as it is.
func aggregate(runs []Result) Result {
	if len(runs) == 1 {
		return runs[0]
	}
	byOps := slices.Clone(runs)
	slices.SortStableFunc(byOps, func(a, b Result) int { return cmp.Compare(a.OpsPerS, b.OpsPerS) })
	agg := byOps[(len(byOps)-1)/2]
	agg.Aggregate = true
	agg.Repeats = len(runs)

	ops := make([]float64, len(runs))
	for i, r := range runs {
		ops[i] = r.OpsPerS
	}
	agg.OpsPerSRuns = ops
	agg.OpsPerS = *lowerMedian(ops)
	agg.OpsPerSMin, agg.OpsPerSMax = ptr(slices.Min(ops)), ptr(slices.Max(ops))
	if agg.IntendedPerS != nil && *agg.IntendedPerS > 0 {
		agg.PctIntended = ptr(100 * agg.OpsPerS / *agg.IntendedPerS)
	}

	metric := func(v func(Result) *float64) []float64 {
		var out []float64
		for _, r := range runs {
			if p := v(r); p != nil {
				out = append(out, *p)
			}
		}
		return out
	}
	client := metric(func(r Result) *float64 { return r.ClientCPUusPerOp })
	agg.ClientCPUusPerOp = lowerMedian(client)
	if len(client) > 0 {
		agg.ClientCPUusPerOpMin, agg.ClientCPUusPerOpMax = ptr(slices.Min(client)), ptr(slices.Max(client))
	}
	agg.ServerCPUusPerOp = lowerMedian(metric(func(r Result) *float64 { return r.ServerCPUusPerOp }))
	agg.CPUusPerOp = lowerMedian(metric(func(r Result) *float64 { return r.CPUusPerOp }))

	agg.Errors, agg.FirstError, agg.Bounded = 0, "", false
	for _, r := range runs {
		agg.Errors += r.Errors
		if agg.FirstError == "" {
			agg.FirstError = r.FirstError
		}
		agg.Bounded = agg.Bounded || r.Bounded
	}
	return agg
}

// lowerMedian is the median of vs, the lower of the middle two for an even
// count; nil for none.
func lowerMedian(vs []float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return ptr(s[(len(s)-1)/2])
}

// roundRatios is num's ops/s over den's in each round of a point, from the
// aggregates' OpsPerSRuns; nil when either path is missing or ran once.
func roundRatios(got map[string]Result, num, den string) []float64 {
	n, okn := got[num]
	d, okd := got[den]
	if !okn || !okd || len(n.OpsPerSRuns) < 2 || len(n.OpsPerSRuns) != len(d.OpsPerSRuns) {
		return nil
	}
	out := make([]float64, len(n.OpsPerSRuns))
	for i := range out {
		if d.OpsPerSRuns[i] <= 0 {
			return nil
		}
		out[i] = n.OpsPerSRuns[i] / d.OpsPerSRuns[i]
	}
	return out
}

// roundRatioNotes are the ratios of each round of a point, one note per
// ratio the table and report give: "d÷batch per round 0.97 1.02 0.95".
func roundRatioNotes(got map[string]Result) []string {
	var notes []string
	for _, rc := range reportRatios {
		rs := roundRatios(got, rc[0], rc[1])
		if rs == nil {
			continue
		}
		texts := make([]string, len(rs))
		for i, v := range rs {
			texts[i] = fmt.Sprintf("%.2f", v)
		}
		notes = append(notes, fmt.Sprintf("%s÷%s per round %s", rc[0][:1], rc[1], strings.Join(texts, " ")))
	}
	return notes
}

// repeatText says what the table's and report's figures are with -repeat:
// "" for single runs.
func repeatText(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf("medians of %d interleaved runs per path (each path's runs alternate in order with the other paths'; the notes give each ratio per round)", n)
}
