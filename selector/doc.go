// Package selector holds rpcx client.Selector plugins for the node-ordering
// half of the group policies, and the context key that picks a group policy
// per call.
//
// LocalFirst and RandomOrder work with any rpcx XClient, plain or drop-in,
// through SetSelector (xc.SetSelector(selector.NewLocalFirst(addr))); with
// a context made by Track or WithPolicy they visit each server at most
// once per call across the retries of the Failover and Failtry fail modes
// (LocalFirst: the local server first, then the others in random order, as
// ecall's call_one does). WithPolicy carries a group policy in a context,
// which package group's XClient wrapper reads, so an existing call site
// switches policy by its context alone:
//
//	err := xc.Call(selector.WithPolicy(ctx, selector.CallAll), "Mul", args, &results)
package selector
