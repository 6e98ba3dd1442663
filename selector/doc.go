// Package selector holds rpcx client.Selector plugins for the node-ordering
// half of the group policies, and the context key that picks a group policy
// per call.
//
// LocalFirst and RandomOrder work with any rpcx XClient, plain or drop-in,
// through SetSelector:
//
//	xc.SetSelector(selector.NewLocalFirst("127.0.0.1:8972"))
//
// rpcx asks a selector for one server per attempt. Under the Failover or
// Failtry fail modes an XClient retries with the same context, so a context
// made by Track (or WithPolicy, which tracks too) lets these selectors visit
// each server at most once per call, in policy order: the local server
// first, then the others in random order, as ecall's call_one does.
//
// WithPolicy and PolicyFrom carry a group policy in a context; the wrapper
// XClient of package group reads it, so an existing call site switches
// policy by changing only its context:
//
//	err := xc.Call(selector.WithPolicy(ctx, selector.CallAll), "Mul", args, &results)
//
// The package starts no goroutines.
package selector
