// Package batchclient is the client half of rpcxbatch: calls, casts and
// sends from any number of goroutines are queued per server and written
// as batch frames over a small pool of TCP connections ("lanes"), and the
// server's reply frames are handed back call by call. A server without the
// batch plugin is reached over plain rpcx instead, with the same API.
//
// NewXClient is a drop-in for rpcx's client.NewXClient: the same
// arguments (batch options may follow), and call sites, selectors, fail
// modes, client plugins and discovery stay rpcx's; the server adds
// batchserver.New (ExampleNewXClient). New returns a Client that addresses
// servers by host:port: Call, Go, Cast, and Send (in order per WithKey
// key); Info, Start, Stop and Close manage the connections
// (ExampleClient_Call, ExampleClient_Send).
//
// The defaults suit most uses. Those people change: WithLaneRange and
// WithLanes (lanes per server), WithQueueLimits and WithOverflow (how much
// a lane queues, and what a caller meets when it is full), WithHeartbeat,
// WithDialTimeout, WithTLS and WithAuth. FromRPCX maps an rpcx
// client.Option onto them, as NewXClient does.
//
// docs/client.md describes the client and its options,
// docs/compatibility.md what the batch path does next to rpcx, and
// docs/architecture.md its layers, goroutines and locks.
package batchclient
