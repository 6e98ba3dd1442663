// Package testsvc holds the small rpcx services the tests, benchmarks and
// examples of rpcxbatch run against, and helpers to serve them on loopback.
//
// Goroutines: Serve runs the rpcx server on one, ended by the stop
// function it returns.
package testsvc
