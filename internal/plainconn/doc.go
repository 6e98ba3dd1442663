// Package plainconn caches plain rpcx clients per address: a Slot holds the
// client of one address (dialled once however many callers wait for it,
// each within its own context; redialled when its connection broke;
// counted in use per call, so a client is retired or forgotten only once no
// call uses it), and a Map keeps a Slot per address. batchclient's plain
// fallback, its stopped addresses and group's PlainCaller all use it.
//
// Call is the one wait for a plain rpcx call within a context (rpcx's Go,
// the reply decoded into a copy), used by batchclient's plain calls,
// group's PlainCaller and lock's PlainTransport.
//
// A Slot's dial runs on a goroutine that Slot.Close cancels and waits for
// (docs/architecture.md); the rpcx clients a slot holds run rpcx's own
// goroutines, which Slot.Close, CloseIdle and Retire end.
package plainconn
