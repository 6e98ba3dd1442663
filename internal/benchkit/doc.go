// Package benchkit holds what the benchmark programs share: perf (the
// side-by-side harness), perf/locks (the lock benchmark) and cmd/rpcxbench
// (the tool users point at their own service). It starts a copy of the
// harness binary as a child process, writes a CPU profile per process,
// reads a process's CPU time, keeps a latency histogram, formats numbers
// and draws the figures' rows (SVG or PNG), and runs a progress line's
// ticker (Every).
//
// Its goroutines: a Child's reaper, which ends when the process exits,
// and Every's ticker, which its stop ends and waits for.
package benchkit
