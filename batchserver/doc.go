// Package batchserver is the server half of rpcxbatch: an rpcx server plugin
// that accepts batch frames from rpcxbatch client lanes, runs every entry as
// rpcx would run a single request, and writes the replies back in batches.
//
// Add it in one line, before or after registering services:
//
//	s := server.NewServer()
//	s.RegisterName("Arith", new(Arith), "")
//	p, err := batchserver.New(s)
//
// Services are registered exactly as with plain rpcx, before or after New
// (the plugin learns them through rpcx's Register, RegisterFunction and
// Unregister hooks, and on a miss reads rpcx's own service table), and
// RegisterWithMethods exposes on the batch path exactly the methods it
// exposes on the plain path. Plain rpcx clients keep working against the
// same server, on the same port.
//
// docs/server.md describes the plugin and its options,
// docs/compatibility.md what the batch path does next to rpcx, and
// docs/architecture.md the goroutines and timers it starts.
package batchserver
