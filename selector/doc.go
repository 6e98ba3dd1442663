// Package selector holds rpcx client.Selector plugins for the node-ordering
// half of the group policies, and the context key that picks a group policy
// per call.
//
// LocalFirst and RandomOrder work with any rpcx XClient, plain or drop-in,
// through SetSelector:
//
//	xc.SetSelector(selector.NewLocalFirst("127.0.0.1:8972"))
//
// With a context made by Track (or WithPolicy, which tracks too) they
// visit each server at most once per call across the retries of the
// Failover and Failtry fail modes: the local server first, then the others
// in random order, as ecall's call_one does. WithPolicy and PolicyFrom
// carry a group policy in a context, which the wrapper XClient of package
// group reads, so an existing call site switches policy by its context
// alone:
//
//	err := xc.Call(selector.WithPolicy(ctx, selector.CallAll), "Mul", args, &results)
package selector
