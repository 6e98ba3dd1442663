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
// the call's context says so (selector.WithPolicy).
//
// Lifetimes: the per-node calls of CallAny, CallAll and CallAllWait run
// concurrently under the caller's context (started with the Caller's Go
// when it has one, as *batchclient.Client and *PlainCaller do, so no
// goroutine per node; in a goroutine per node for the local node, with
// NodeTimeout, or for other Callers). When a policy
// returns early they run on to their own end and their results are
// dropped; none outlives the caller's context (or the transport's own
// bound on a call). Give ctx a deadline, or pass NodeTimeout, when a node
// may hang. Casts run on goroutines of the group that keep ctx's deadline
// but not its cancellation. Group.Close ends and waits for every
// goroutine the group started; operations after it fail with ErrClosed.
//
// Arguments: every operation is done with args when it returns. What the
// nodes get is the operation's own copy, encoded with the Caller's codec
// on the caller's goroutine (see Group); arguments that cannot be encoded
// fail the operation with ErrEncode, casts included, and nothing is sent.
// A cast's later fate (an unreachable node, a handler's error) is not
// reported. The local node tried first by CallOne and CallAny gets args
// (and ctx) themselves; the other nodes get them as they were before it
// ran.
//
// Response metadata: when ctx holds a map at share.ResMetaDataKey, as for
// rpcx's Call, CallOne, CallAny, CallAll and CallAllWait fill it as rpcx's
// XClient.Broadcast and Fork do, with every answering node's metadata
// (the error text under protocol.ServiceError for a rejection) and
// share.ServerAddress; unlike rpcx's, without a data race. Each node call
// gets a map of its own, merged into the caller's on the caller's
// goroutine, under the share.Context's lock when ctx is one or derives
// from one (rpcx's Call locks only the former), in the order
// the policy takes the answers: the node whose answer decided the call is
// merged last, so on a success share.ServerAddress names the winner (for
// CallAll, the last node to answer) and a key several nodes set holds the
// last one's value. Answers that come after the operation returned (the
// losers of CallAny, the rest after CallAll's first rejection) are not
// merged: the operation is done with the map when it returns. The local
// node's handler gets a map of its own, as an rpcx server's handler does;
// its share.ServerAddress is the local address. Casts get no metadata.//
// # Goroutines
//
//	goroutine          started by          stopped by               waited for by
//	discovery follow   New, with a         Close (closes g.stop)    Close (<-g.done)
//	                   discovery that
//	                   announces changes
//	cast, per node     Cast* via goOwned   its call ending; Close   Close (owned.running)
//	                   (at most WithMax-   ends its context
//	                   CastsInFlight)
//	per-node call      Call* fan-outs via  its call ending; Close   Close (owned.running)
//	                   goOwned             ends its context
//
// Timers: context.AfterFunc ties each call's and cast's context to the
// group's life (stopped when the call ends).
package group
