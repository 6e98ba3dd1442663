package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/smallnest/rpcx/client"
)

// Result is one node's successful reply.
type Result[R any] struct {
	// Node is the address as it appears in the node list.
	Node string
	// Value is the reply.
	Value R
}

// outcome is one node's answer: reply set on success, err otherwise, and
// the response metadata that came with it (see resmeta.go).
type outcome struct {
	node  string
	reply any
	err   *NodeError
	meta  map[string]string
}

// spec is one group call being run.
type spec struct {
	g        *Group
	policy   string
	service  string
	method   string
	args     any
	newReply func() any // a fresh reply pointer; nil for casts
	cfg      callConfig
	nodes    []string
	// own is the call's copy of args, made by takeArgs before args are
	// handed to anything that may read them after the operation returned;
	// nil until then. It points to ownArgs.
	own     *argsCopy
	ownArgs argsCopy
	// res is the caller's response-metadata map (see takeRes).
	res resSink
}

// takeArgs makes the call's own copy of args, once, on the caller's
// goroutine. Everything handed to a remote node, and to a local node on a
// goroutine of its own, is read from the copy: the caller may reuse args
// as soon as the operation returns. The error wraps ErrEncode.
func (s *spec) takeArgs() error {
	if s.own != nil {
		return nil
	}
	if err := s.ownArgs.take(serializeTypeOf(s.g.caller), s.args); err != nil {
		return fmt.Errorf("group: %s %s.%s: %w", s.policy, s.service, s.method, err)
	}
	s.own = &s.ownArgs
	return nil
}

// argsFor returns the arguments to hand to node from the call's copy (see
// takeArgs): the shared copy for a remote node, a fresh one for the local
// node, whose handler may change its arguments.
func (s *spec) argsFor(node string) (any, error) {
	if s.g.isLocal(node) {
		a, err := s.own.fresh()
		if err != nil {
			return nil, fmt.Errorf("group: %s %s.%s: %w", s.policy, s.service, s.method, err)
		}
		return a, nil
	}
	return s.own.shared, nil
}

// usable is the error of a policy that needs a node (CallOne, CallAny,
// CallAll, CastOne) given none, ErrEmptyNodes, or on a closed group;
// nil when it may go on.
func (s *spec) usable() error {
	if len(s.nodes) == 0 {
		return ErrEmptyNodes
	}
	if s.g.isClosed() {
		return s.closedErr()
	}
	return nil
}

// closedErr is the error of an operation on a closed group.
func (s *spec) closedErr() error {
	return fmt.Errorf("group: %s %s.%s: %w", s.policy, s.service, s.method, ErrClosed)
}

func (g *Group) newSpec(policy, service, method string, args any, newReply func() any, opts []CallOption) *spec {
	s := &spec{g: g, policy: policy, service: service, method: method, args: args, newReply: newReply}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.hasNodes {
		s.nodes = normalize(s.cfg.nodes)
	} else {
		s.nodes = g.Nodes()
	}
	return s
}

// call runs the call with args on one node and waits for its answer. The
// node call gets a response-metadata map of its own (see resContext),
// which the outcome carries.
func (s *spec) call(ctx context.Context, node string, args any) outcome {
	if s.cfg.nodeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.nodeTimeout)
		defer cancel()
	}
	ctx, md := s.resContext(ctx, node)
	reply := s.newReply()
	if s.g.isLocal(node) {
		if err := s.g.local.call(ctx, s.service, s.method, args, reply); err != nil {
			return outcome{node: node, err: rejection(node, err), meta: localResMeta(md, err)}
		}
		return outcome{node: node, reply: reply, meta: md}
	}
	if err := s.g.caller.Call(ctx, node, s.service, s.method, args, reply); err != nil {
		return outcome{node: node, err: s.remoteError(ctx, node, err), meta: md}
	}
	return outcome{node: node, reply: reply, meta: md}
}

// remoteError classifies a remote call's error.
func (s *spec) remoteError(ctx context.Context, node string, err error) *NodeError {
	if ranOutOfTime(ctx, err) {
		// The server ended the call at the deadline the call carried, a
		// moment before the client's own timer fired: the node's call was
		// killed by its deadline, not rejected by the handler. Wait for
		// that timer (at most deadlineSlack), so that the policy sees the
		// context ended, as it would had the client's timer won.
		t := time.NewTimer(2 * deadlineSlack)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		err = fmt.Errorf("%w (the server stopped the call at its deadline: %v)", context.DeadlineExceeded, err)
		return &NodeError{Node: node, Err: err, kind: ErrUnreachable}
	}
	return classify(node, err)
}

// goCaller is a Caller that can start a call and return at once, its end
// signalled on a channel (*batchclient.Client and *PlainCaller can): a
// fan-out then needs no goroutine per remote node.
type goCaller interface {
	Go(ctx context.Context, addr, service, method string, args, reply any, done chan *client.Call) *client.Call
}

// fanIn is the outcomes of a fan-out, read in arrival order.
type fanIn struct {
	s     *spec
	ctx   context.Context
	done  chan *client.Call
	nodes map[*client.Call]nodeCall
}

// nodeCall is one node call of a fan-out: its node, and the
// response-metadata map its context holds (nil: none).
type nodeCall struct {
	node string
	md   map[string]string
}

// fanOut starts the call on every node and returns the fan-in its
// outcomes arrive on; takeArgs must have run. Remote calls are started with
// the caller's Go when it has one and no NodeTimeout applies (no
// goroutine), in a goroutine each otherwise; local calls run in a
// goroutine each. Those goroutines belong to the group (Close ends and
// joins them). The channel has room for every outcome, so nothing ever
// waits for a reader: each call ends on its own, whether or not anyone
// still listens.
func (s *spec) fanOut(ctx context.Context, nodes []string) *fanIn {
	f := &fanIn{s: s, ctx: ctx, done: make(chan *client.Call, len(nodes)), nodes: make(map[*client.Call]nodeCall, len(nodes))}
	gc, hasGo := s.g.caller.(goCaller)
	for _, n := range nodes {
		if hasGo && s.cfg.nodeTimeout == 0 && !s.g.isLocal(n) {
			// A Go leaves the response metadata on the call (rpcx's Go
			// does); the map of its own is for a Caller that fills the
			// context's, as Call does.
			nctx, md := s.resContext(ctx, n)
			call := gc.Go(nctx, n, s.service, s.method, s.own.shared, s.newReply(), f.done)
			f.nodes[call] = nodeCall{node: n, md: md}
			continue
		}
		call := &client.Call{Done: f.done}
		f.nodes[call] = nodeCall{node: n}
		args, err := s.argsFor(n)
		if err != nil {
			call.Error = &NodeError{Node: n, Err: err, kind: ErrUnreachable}
			call.Done <- call
			continue
		}
		started := s.g.goOwned(func() {
			nctx, stop := s.g.nodeContext(ctx)
			defer stop()
			o := s.call(nctx, n, args)
			call.Reply, call.ResMetadata = o.reply, o.meta
			if o.err != nil {
				call.Error = o.err
			}
			call.Done <- call
		})
		if !started {
			call.Error = &NodeError{Node: n, Err: s.closedErr(), kind: ErrUnreachable}
			call.Done <- call
		}
	}
	return f
}

// next returns the next outcome to arrive, or false when ctx ended first.
func (f *fanIn) next() (outcome, bool) {
	select {
	case call := <-f.done:
		nc := f.nodes[call]
		node, meta := nc.node, call.ResMetadata
		if len(meta) == 0 {
			meta = nc.md
		}
		var ne *NodeError
		switch {
		case call.Error == nil:
			return outcome{node: node, reply: call.Reply, meta: meta}, true
		case errors.As(call.Error, &ne) && ne.Node == node:
			return outcome{node: node, err: ne, meta: meta}, true
		default:
			return outcome{node: node, err: f.s.remoteError(f.ctx, node, call.Error), meta: meta}, true
		}
	case <-f.ctx.Done():
		return outcome{}, false
	}
}

// cast runs the call on node without a reply, returning at once;
// takeArgs must have run. The cast gets ctx's values and deadline but not
// its cancellation, so a caller that cancels its context right after
// returning does not drop casts that were still being queued. It runs on
// a goroutine of the group, which ends when the cast is queued (or fails
// to be), or, for the local node, when the handler returns; Close ends
// its context and waits for it. When the group already runs its bound of
// casts, cast first waits for one to end, within ctx. The error is the
// copy's (ErrEncode), ErrCastsInFlight or ErrClosed; what happens to the
// cast later is not reported.
func (s *spec) cast(ctx context.Context, node string) error {
	args, err := s.argsFor(node)
	if err != nil {
		return err
	}
	if err := s.acquireCast(ctx); err != nil {
		return err
	}
	started := s.g.goOwned(func() {
		defer s.g.releaseCast()
		cctx, stop := s.g.castContext(ctx)
		defer stop()
		if s.g.isLocal(node) {
			// Its handler gets a response-metadata map, as an rpcx
			// server's does for a oneway call; nobody reads it.
			cctx, _ := s.resContext(cctx, node)
			_ = s.g.local.call(cctx, s.service, s.method, args, nil)
			return
		}
		_ = s.g.caller.Cast(cctx, node, s.service, s.method, args)
	})
	if !started {
		s.g.releaseCast()
		return s.closedErr()
	}
	return nil
}

// counts reports whether an outcome's error is reported under the call's
// unreachable switch.
func (s *spec) counts(e *NodeError) bool {
	return !e.Unreachable() || s.cfg.unreachableAsError
}

// interrupted is the error of a call whose caller's context ended before
// the policy reached a decision (ecall's killed master).
func (s *spec) interrupted(ctx context.Context) error {
	return fmt.Errorf("group: %s %s.%s: the caller's context ended before a decision: %w",
		s.policy, s.service, s.method, cause(ctx))
}

// ended reports whether ctx has ended or its deadline has passed (its
// timer may fire a moment after a transport already reported the
// deadline).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// cause is ctx's cause, or context.DeadlineExceeded when its deadline has
// passed but its timer has not fired yet.
func cause(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// deadlineSlack is how close to its deadline a call must be for a
// server-side deadline error to count as the deadline's doing.
const deadlineSlack = 50 * time.Millisecond

// ranOutOfTime reports whether err is a server's report that the call's
// deadline passed (the handler's context.DeadlineExceeded, or the batch
// plugin's refusal to start a late entry) and ctx's deadline has indeed
// come, or is about to.
func ranOutOfTime(ctx context.Context, err error) bool {
	d, ok := ctx.Deadline()
	if !ok || time.Until(d) > deadlineSlack {
		return false
	}
	var se client.ServiceError
	if !errors.As(err, &se) {
		return false
	}
	text := se.Error()
	return text == context.DeadlineExceeded.Error() || strings.Contains(text, "deadline passed")
}
