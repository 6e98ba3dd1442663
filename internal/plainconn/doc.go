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
// # Goroutines
//
//	goroutine       started by              stopped by                waited for by
//	Slot dial, at   Slot.Use, when the      its connect returning;    Slot.Close (wg),
//	most one per    client is missing or    Slot.Close cancels its    and the callers of
//	slot            broken and none runs    context                   Use within their ctx
//
// The rpcx clients a slot holds run rpcx's own goroutines; Slot.Close,
// CloseIdle and Retire close those clients.
package plainconn
