// Package follow keeps a view of an rpcx ServiceDiscovery's servers.
//
// Follow runs on its caller's goroutine until stop closes or the
// discovery's channel closes; it starts no goroutines of its own.
package follow
