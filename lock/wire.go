package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// AcquireArgs asks a node to take keys for a holder of another node.
type AcquireArgs struct {
	Owner  OwnerID
	Age    int64
	Origin string // the holder's node address
	// OriginInc is the incarnation of the holder's node.
	OriginInc uint64
	Seq       uint64 // the holder's request number
	// LastOK is the holder's last request to this node that succeeded:
	// every request between it and Seq failed, so what they did here is
	// undone first, even if their Abort is still on its way.
	LastOK uint64
	Mode   Mode
	Keys   []string
	// Released repeats the keys the holder released on this node since its
	// last request there, so that a Release still on its way cannot make
	// this request see a stale hold.
	Released []string
	Holds    bool // the holder holds something somewhere: walk for deadlocks at once
	// ReleasedAll says that the holder holds nothing on this node any
	// more: everything it holds here, that no request after Seq-1 asked
	// for again, is given back first (as a Release with All at Seq-1
	// would), and Released is left empty. A holder that locks and
	// releases one key at a time sends no key list for its releases.
	ReleasedAll bool

	// keys1 is Keys' storage when a decoded request has one key, the
	// usual case: the decoder then makes no slice for it. Not sent.
	keys1 [1]string
}

// AcquireReply is a node's verdict on an AcquireArgs.
type AcquireReply struct {
	Code int
	Msg  string
	// Token is a grant's fencing token (see Holder.Token); 0 otherwise.
	Token uint64
}

// ReleaseArgs gives back keys (all the holder holds there when Keys is
// nil) unless a request after Seq asked for them again.
type ReleaseArgs struct {
	Owner OwnerID
	Keys  []string
	Seq   uint64
	All   bool
}

// AbortArgs withdraws the holder's requests up to Seq: queued ones end,
// later arrivals are refused, and what request Seq took is given back, and
// with From set what the requests From to Seq took (the holder saw all of
// them fail: one Abort for several failed requests).
type AbortArgs struct {
	Owner OwnerID
	Seq   uint64
	From  uint64
}

// DropArgs ends a holder on a node: everything released, and requests up
// to LastSeq refused when they arrive late.
type DropArgs struct {
	Owner   OwnerID
	LastSeq uint64
}

// Ack is the empty reply of the one-way methods.
type Ack struct{}

const (
	codeOK = iota
	codeDeadlock
	codeProbeLimit
	codeAborted
	codeClosed
	codeUpgrade
	codeTimeout
	codeCanceled
	codeBadRequest
	// codeQueued answers an Acquire that waits: the verdict follows
	// (Answer, Status).
	codeQueued
	// codeUnknown answers a Status for a request the node does not know.
	codeUnknown
)

var codeErrs = map[int]error{
	codeDeadlock:   ErrDeadlock,
	codeProbeLimit: ErrProbeLimit,
	codeAborted:    ErrAborted,
	codeClosed:     ErrClosed,
	codeUpgrade:    ErrUpgrade,
	codeTimeout:    context.DeadlineExceeded,
	codeCanceled:   context.Canceled,
	codeBadRequest: ErrBadRequest,
}

func codeOf(err error) int {
	if err == nil {
		return codeOK
	}
	for c, e := range codeErrs {
		if errors.Is(err, e) {
			return c
		}
	}
	return codeAborted
}

// Reset empties a. An argument type with Reset (rpcx's server.Reset) is
// taken from a pool by rpcx's server and by the batch plugin, and put
// back once the call returned, rather than made for every call: one
// allocation less per Acquire. A request that waits outlives its call,
// so Acquire keeps a copy of its arguments then (detached), never a.
func (a *AcquireArgs) Reset() { *a = AcquireArgs{} }

// detached returns a copy of a that shares nothing a's next use can
// change: its key list is its own (a's may be a's own one-key array).
func (a *AcquireArgs) detached() *AcquireArgs {
	c := *a
	c.Keys = slices.Clone(a.Keys)
	c.Released = slices.Clone(a.Released)
	return &c
}

// Reset empties r. A reply type with Reset (rpcx's server.Reset) is taken
// from a pool by rpcx's server and by the batch plugin, and put back once
// encoded, rather than made for every call: one allocation less per
// Acquire. Acquire and Status write their reply only before they
// return (a request that waits is answered later by an Answer, never
// through the reply), so a reply is the pool's again once encoded.
func (r *AcquireReply) Reset() { *r = AcquireReply{} }

func (r *AcquireReply) set(err error) {
	r.Code = codeOf(err)
	if err != nil {
		r.Msg = err.Error()
	}
}

func (r *AcquireReply) err(node string) error {
	switch r.Code {
	case codeOK:
		return nil
	case codeClosed:
		// The node is closed, not this holder or its node.
		return fmt.Errorf("%w: %s is closed", ErrNodeLost, node)
	}
	e, ok := codeErrs[r.Code]
	if !ok || e == ErrAborted {
		// A holder withdraws a request only once its call returned, so a
		// request still waiting is refused as withdrawn only when the node
		// dropped its holder (it heard nothing from this node for
		// NodeTimeout) or is closing: it was lost with the node.
		return fmt.Errorf("%w: %s dropped the request (it lost this node, or closed)", ErrNodeLost, node)
	}
	return fmt.Errorf("node %s: %w", node, e)
}
