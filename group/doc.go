// Package group applies one rpcx call to a set of nodes under one of
// ecall's group policies, chosen per call:
//
//	| function    | nodes contacted | waits for      | success             | failure                     |
//	|-------------|-----------------|----------------|---------------------|-----------------------------|
//	| CallOne     | one at a time   | first success  | Result[R]           | Rejections / ErrEmptyNodes  |
//	| CallAny     | all in parallel | first success  | Result[R]           | Rejections / ErrNoneAvailable |
//	| CallAll     | all in parallel | all successes  | []Result[R]         | *NodeError / ErrNoneAvailable |
//	| CallAllWait | all in parallel | all replies    | []Result[R], []*NodeError | never fails           |
//	| CastOne     | one             | nothing        | nil                 | ErrEmptyNodes / ErrEncode / ErrCastsInFlight |
//	| CastAll     | all             | nothing        | nil                 | ErrEncode / ErrCastsInFlight |
//
// Every result and error names its node. The rejection convention is
// ecall's: a handler that returns an error rejects (ErrRejected), any other
// return succeeds, a panic is a rejection carrying the panic value
// (ErrPanic, *PanicError), and a node that gives no answer is its own kind
// (ErrUnreachable), left out unless Unreachable(true) is passed. All are
// told apart with errors.Is and errors.As on the *NodeError.
//
// A Group holds a Caller (a *batchclient.Client, which takes lanes to
// batch servers and plain rpcx to the others, so one list may mix both; or
// a *PlainCaller), a node list (WithNodes, or WithDiscovery following an
// rpcx ServiceDiscovery) and an optional local node (WithLocal) whose calls
// run in-process. NewXClient lets an rpcx XClient run these policies when
// the call's context says so (selector.WithPolicy). Group.Close ends and
// waits for every goroutine the group started.
//
// docs/group.md describes the calls' lifetimes (give ctx a deadline, or
// pass NodeTimeout, when a node may hang), what happens to their
// arguments, and how they fill rpcx's response metadata;
// docs/architecture.md the goroutines a Group starts.
package group
