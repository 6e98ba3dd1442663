// Package benchkit holds what the two benchmark harnesses, perf and
// perf/locks, share: starting a copy of the harness binary as a child
// process, a CPU profile per process, number formatting and the SVG row
// their figures are drawn in.
package benchkit
