// Package testsvc holds the small rpcx services the tests, benchmarks and
// perf harness of rpcxbatch run against, and helpers to serve them on
// loopback. The examples define their own: a user copies them.
//
// Goroutines: Serve runs the rpcx server on one, ended by the stop
// function it returns.
package testsvc
