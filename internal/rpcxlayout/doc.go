// Package rpcxlayout is the one place that reads rpcx's unexported state:
// the fields of an rpcx v1.9.4 server.Server (its service table, option
// fields, shutdown state, handler router), the lock of a share.Context,
// the stack of the RpcServiceInternalError a method's panic becomes,
// and the selector of an rpcx XClient with the mutex that guards it. rpcx
// offers no accessor for them; each is read with
// reflect (and unsafe, to make the unexported field usable) after its
// name and type are checked, and a function reports false where the
// layout is not as in v1.9.4, rather than guess. Check lists every field
// read here that is not laid out so; the package's test fails on it,
// naming the field.
//
// It starts no goroutines of its own (finding the XClient's type makes and
// closes one XClient, which dials nothing).
package rpcxlayout
