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
// Every result and error names its node. As in ecall, a handler's error
// rejects (ErrRejected), a panic is a rejection carrying its value
// (ErrPanic, *PanicError), and a node that gives no answer is its own kind
// (ErrUnreachable), left out unless Unreachable(true) is passed; all are
// told apart with errors.Is and errors.As on the *NodeError. A Group (see
// New) holds the Caller, the nodes and an optional in-process local node;
// NewXClient runs these policies under an rpcx XClient when the call's
// context says so (selector.WithPolicy). docs/group.md says more.
package group
