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
// The plugin learns services through rpcx's Register, RegisterFunction and
// Unregister plugin hooks, so services are registered exactly as with plain
// rpcx. Services registered before New was called are found too: on a miss
// the plugin reads rpcx's own service table (see services.go), so the order
// of New and Register does not matter, and RegisterWithMethods exposes on the
// batch path exactly the methods it exposes on the plain path.
//
// Plain rpcx clients keep working against the same server, on the same port.
package batchserver
