// Package lock is a distributed lock manager that rides the rpcxbatch
// transport: the Go counterpart of the Erlang library elock.
//
// A Node is attached to an rpcx server (its lock service goes through the
// batch plugin like any other service) and to a Transport, normally a
// *batchclient.Client, for reaching the other nodes. A Holder, the stand-in
// for an Erlang process, is an object with a context: it takes Shared or
// Exclusive locks on string keys, on its own node or on a list of nodes, in
// one call for one or many keys, and everything it holds is released on
// every node when it is closed or its context ends.
//
// A request on several nodes is all or nothing, and asks them in one order
// that every node uses, so two requests for the same keys cannot each be
// granted on one node and wait on the other. A holder's locks on another
// node rest on a lease: when it runs out the holder is told (Holder.Lost,
// Holder.Context, ErrLockLost) before that node can grant its locks to
// someone else. Every grant carries a fencing token that grows for its key
// on its node, across restarts too.
//
// docs/locks.md describes the lock table, the order of requests, releases
// and their lingering, leases, tokens, deadlock detection and failures;
// docs/architecture.md the goroutines and timers a Node starts.
package lock
