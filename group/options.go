package group

import (
	"slices"
	"time"
)

// CallOption adjusts one group call.
type CallOption func(*callConfig)

type callConfig struct {
	unreachableAsError bool
	nodeTimeout        time.Duration
	nodes              []string
	hasNodes           bool
}

// Unreachable sets whether an unreachable node counts as an error (ecall's
// RpcErr switch). With false, the default, such a node is left out as if it
// were not in the list; with true it is reported like a rejection: CallOne
// and CallAny list it in their Rejections, and CallAll fails with it.
// CallAllWait always reports unreachable nodes; casts never do.
func Unreachable(asError bool) CallOption {
	return func(c *callConfig) { c.unreachableAsError = asError }
}

// NodeTimeout bounds each node's call: a node that has not answered after d
// counts as unreachable (its per-node call ended, as a killed per-node
// caller does in ecall). Zero, the default, bounds it by the caller's
// context only.
func NodeTimeout(d time.Duration) CallOption {
	return func(c *callConfig) { c.nodeTimeout = d }
}

// On makes this call use nodes instead of the group's node list. An empty
// list is an empty list (ErrEmptyNodes for the policies that need a node).
func On(nodes ...string) CallOption {
	return func(c *callConfig) { c.nodes, c.hasNodes = slices.Clone(nodes), true }
}
