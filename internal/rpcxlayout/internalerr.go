package rpcxlayout

import "github.com/smallnest/rpcx/server"

// internalErrStack locates the unexported stack of rpcx's
// RpcServiceInternalError, which its Error text ends with.
var internalErrStack = locate[server.RpcServiceInternalError, string]("stack")

// NewServiceInternalError returns the error rpcx's server makes of a
// service method's panic (server/service.go, call): the panic value's
// text, the method, the argument and the stack of the panicking
// goroutine. ok is false where the error's stack field is not laid out as
// in rpcx v1.9.4; the error then has no stack.
func NewServiceInternalError(errText, method string, argv any, stack string) (e *server.RpcServiceInternalError, ok bool) {
	e = &server.RpcServiceInternalError{Err: errText, Method: method, Argv: argv}
	if !internalErrStack.ok {
		return e, false
	}
	*internalErrStack.in(e) = stack
	return e, true
}
