// Package invoke calls an rpcx service method, func(ctx, args, reply)
// error on a receiver or registered as a function, as rpcx's server does:
// by reflection, or, for the shape most services use, through a plain Go
// func (see direct). It is the one reflection caller of the module:
// batchserver calls every batched entry's handler through it, and group
// its in-process calls to the local node.
//
// It starts no goroutines: a method runs on its caller's.
package invoke
