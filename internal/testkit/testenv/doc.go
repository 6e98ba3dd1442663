// Package testenv holds what the test suites of several rpcxbatch packages
// need alike: a client that closes with its test, a wait for a pool to come
// up, a context that ends with its test, an address
// a server can be restarted at.
//
// Goroutines: Concurrently runs fn on n goroutines and waits for them.
package testenv
