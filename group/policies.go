package group

import (
	"context"
	"math/rand/v2"

	"github.com/rpcxbatch/rpcxbatch/selector"
)

// The policies below are ecall's group functions. Each takes the caller's
// context, the group, the rpcx service and method, the arguments, and call
// options (Unreachable, NodeTimeout, On); R is the reply type (the method's
// *R reply, as with rpcx). The per-node calls run under contexts derived
// from ctx: when a policy returns early the calls still running go on to
// their own end (a reply, or the end of ctx) and their results are dropped.
// When ctx ends before a policy has decided, it returns an error wrapping
// ctx's error.

// CallOne tries the nodes one at a time until one succeeds: the local node
// first if it is in the list, then the others in random order. A node that
// rejects is recorded and the next is tried; an unreachable node is skipped
// (recorded with Unreachable(true)). When no node succeeds the error is the
// Rejections, empty when every node was unreachable; an empty list gives
// ErrEmptyNodes. It also fails with ErrEncode when args cannot be encoded
// (nothing is sent), ErrClosed after Close, and an error wrapping ctx's
// cause when ctx ends before a node succeeded.
func CallOne[R any](ctx context.Context, g *Group, service, method string, args any, opts ...CallOption) (Result[R], error) {
	o, err := g.newSpec("CallOne", service, method, args, newOf[R], opts).callOne(ctx)
	if err != nil {
		return Result[R]{}, err
	}
	return resultOf[R](o), nil
}

// CallAny asks every node and takes the first success. If the local node
// is in the list it is called first and alone; when it succeeds the call is
// cast to the other nodes and the local result returned without waiting.
// (The casts count against WithMaxCastsInFlight: when the group runs its
// bound, CallAny waits for room within ctx before it returns, and drops
// the casts left when ctx ends.) Otherwise (or when it fails) the other
// nodes are called in parallel and the first success wins. When every
// node fails the error is the Rejections (the local one first, then in
// arrival order); when none could be reached (with the default
// Unreachable(false)) it is ErrNoneAvailable; an empty list gives
// ErrEmptyNodes. It also fails with ErrEncode when args cannot be encoded
// (nothing is sent), ErrClosed after Close, and an error wrapping ctx's
// cause when ctx ends before a node succeeded.
func CallAny[R any](ctx context.Context, g *Group, service, method string, args any, opts ...CallOption) (Result[R], error) {
	o, err := g.newSpec("CallAny", service, method, args, newOf[R], opts).callAny(ctx)
	if err != nil {
		return Result[R]{}, err
	}
	return resultOf[R](o), nil
}

// CallAll asks every node in parallel and needs every one to succeed. The
// first rejection ends the call with that node's *NodeError (the other
// nodes' calls have started and go on; their results are dropped). With
// Unreachable(true) an unreachable node ends it the same way; by default it
// is skipped. On success the replies come in the order they arrived. When
// no node could be reached the error is ErrNoneAvailable; an empty list
// gives ErrEmptyNodes. It also fails with ErrEncode when args cannot be
// encoded (nothing is sent), ErrClosed after Close, and an error wrapping
// ctx's cause when ctx ends before every node succeeded.
func CallAll[R any](ctx context.Context, g *Group, service, method string, args any, opts ...CallOption) ([]Result[R], error) {
	os, err := g.newSpec("CallAll", service, method, args, newOf[R], opts).callAll(ctx)
	if err != nil {
		return nil, err
	}
	return resultsOf[R](os), nil
}

// CallAllWait asks every node in parallel, waits for every one and returns
// the replies and the failures (rejections and unreachable nodes), each in
// arrival order. It never fails: an empty list gives two empty lists, and
// when ctx ends first every node that has not answered is reported as
// unreachable with ctx's error. The Unreachable option does not apply.
func CallAllWait[R any](ctx context.Context, g *Group, service, method string, args any, opts ...CallOption) ([]Result[R], []*NodeError) {
	os, errs := g.newSpec("CallAllWait", service, method, args, newOf[R], opts).callAllWait(ctx)
	return resultsOf[R](os), errs
}

// CastOne runs the call on one node without waiting for or getting a
// reply: the local node if it is in the list, otherwise a random one. It
// returns at once, done with args (see Group); what happens to the cast
// afterwards is not reported. Its error is ErrEmptyNodes for an empty
// list, ErrEncode when args cannot be encoded (nothing is sent), ErrClosed
// after Close, and ErrCastsInFlight when the group runs as many casts as
// WithMaxCastsInFlight allows and ctx ended before one of them did (the
// cast was not started). The cast keeps ctx's deadline but not its
// cancellation.
func CastOne(ctx context.Context, g *Group, service, method string, args any, opts ...CallOption) error {
	return g.newSpec("CastOne", service, method, args, nil, opts).castOne(ctx)
}

// CastAll runs the call on every node of the list (each entry, the local
// node included) without waiting for or getting replies. It returns at
// once, done with args (see Group); what happens to each cast afterwards
// (an unreachable node, a handler's error) is not reported. Its error is
// ErrEncode when args cannot be encoded (nothing is sent to any node),
// ErrClosed after Close, ErrCastsInFlight when the group runs as many
// casts as WithMaxCastsInFlight allows and ctx ended before one of them
// did (the casts to the nodes before that one in the list were started,
// the rest were not), and nil otherwise, an empty list included. The
// casts keep ctx's deadline but not its cancellation.
func CastAll(ctx context.Context, g *Group, service, method string, args any, opts ...CallOption) error {
	return g.newSpec("CastAll", service, method, args, nil, opts).castAll(ctx)
}

func newOf[R any]() any { return new(R) }

func resultOf[R any](o outcome) Result[R] {
	return Result[R]{Node: o.node, Value: *o.reply.(*R)}
}

func resultsOf[R any](os []outcome) []Result[R] {
	out := make([]Result[R], len(os))
	for i, o := range os {
		out[i] = resultOf[R](o)
	}
	return out
}

func (s *spec) callOne(ctx context.Context) (outcome, error) {
	if err := s.usable(); err != nil {
		return outcome{}, err
	}
	s.takeRes(ctx)
	order := selector.Order(s.nodes, s.g.Local())
	// The local node, tried first, runs on this goroutine, done before it
	// returns: it gets args and ctx themselves. A remote call may go on
	// reading its arguments after it returned (rpcx's client does when ctx
	// ends), so it gets the call's own copy, taken before the local call:
	// the local handler may change what it was given.
	own := ctx
	if len(order) > 1 || !s.g.isLocal(order[0]) {
		if err := s.takeArgs(); err != nil {
			return outcome{}, err
		}
		own = s.ownContext(ctx)
	}
	errs := Rejections{}
	for _, n := range order {
		var o outcome
		if s.g.isLocal(n) {
			o = s.call(ctx, n, s.args)
		} else {
			o = s.call(own, n, s.own.shared)
		}
		if res, done, err := s.firstWins(ctx, o, &errs); done {
			return res, err
		}
	}
	return outcome{}, errs
}

// firstWins takes one node's outcome o of a call that its first success
// ends (CallOne, CallAny): it keeps o's response metadata and reports
// done when o ends the call, with o when it succeeded, or with the
// interruption when ctx ended; otherwise o's error joins errs when it
// counts.
func (s *spec) firstWins(ctx context.Context, o outcome, errs *Rejections) (res outcome, done bool, err error) {
	s.mergeRes(o.node, o.meta)
	if o.err == nil {
		return o, true, nil
	}
	if ended(ctx) {
		return outcome{}, true, s.interrupted(ctx)
	}
	if s.counts(o.err) {
		*errs = append(*errs, o.err)
	}
	return outcome{}, false, nil
}

func (s *spec) callAny(ctx context.Context) (outcome, error) {
	if err := s.usable(); err != nil {
		return outcome{}, err
	}
	s.takeRes(ctx)
	rest := s.nodes
	errs := Rejections{}
	own := ctx
	if li := s.localIndex(); li >= 0 {
		rest = append(s.nodes[:li:li], s.nodes[li+1:]...)
		if len(rest) > 0 {
			// Before the local call, which gets args and ctx themselves
			// and may change them: the others get them as they were, and
			// arguments the others cannot get fail the call before
			// anything ran.
			if err := s.takeArgs(); err != nil {
				return outcome{}, err
			}
			own = s.ownContext(ctx)
		}
		o := s.call(ctx, s.nodes[li], s.args)
		s.mergeRes(o.node, o.meta)
		if o.err == nil {
			for _, n := range rest {
				// Only ErrClosed (Close having begun meanwhile) and
				// ErrCastsInFlight (ctx ended while the cast waited for
				// room) are possible here: the local result stands.
				_ = s.cast(own, n)
			}
			return o, nil
		}
		if ended(ctx) {
			return outcome{}, s.interrupted(ctx)
		}
		errs = append(errs, o.err) // a local call is never unreachable
	}
	if len(rest) > 0 && s.own == nil {
		if err := s.takeArgs(); err != nil {
			return outcome{}, err
		}
		own = s.ownContext(ctx)
	}
	f := s.fanOut(own, rest)
	for range rest {
		o, ok := f.next()
		if !ok {
			return outcome{}, s.interrupted(ctx)
		}
		if res, done, err := s.firstWins(ctx, o, &errs); done {
			return res, err
		}
	}
	if len(errs) == 0 {
		return outcome{}, ErrNoneAvailable
	}
	return outcome{}, errs
}

func (s *spec) callAll(ctx context.Context) ([]outcome, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := s.takeArgs(); err != nil {
		return nil, err
	}
	s.takeRes(ctx)
	ctx = s.ownContext(ctx)
	f := s.fanOut(ctx, s.nodes)
	oks := make([]outcome, 0, len(s.nodes))
	for range s.nodes {
		o, ok := f.next()
		if !ok {
			return nil, s.interrupted(ctx)
		}
		s.mergeRes(o.node, o.meta)
		if o.err == nil {
			oks = append(oks, o)
			continue
		}
		if ended(ctx) {
			return nil, s.interrupted(ctx)
		}
		if s.counts(o.err) {
			return nil, o.err
		}
	}
	if len(oks) == 0 {
		return nil, ErrNoneAvailable
	}
	return oks, nil
}

func (s *spec) callAllWait(ctx context.Context) ([]outcome, []*NodeError) {
	oks, errs := []outcome{}, []*NodeError{}
	if len(s.nodes) == 0 {
		return oks, errs
	}
	err := s.takeArgs()
	if err == nil && s.g.isClosed() {
		err = s.closedErr()
	}
	if err != nil {
		// Nothing was sent: no node got the call.
		for _, n := range s.nodes {
			errs = append(errs, &NodeError{Node: n, Err: err, kind: ErrUnreachable})
		}
		return oks, errs
	}
	s.takeRes(ctx)
	ctx = s.ownContext(ctx)
	f := s.fanOut(ctx, s.nodes)
	owed := make(map[string]int, len(s.nodes)) // answers each node still owes
	for _, n := range s.nodes {
		owed[n]++
	}
	for range s.nodes {
		o, ok := f.next()
		if !ok {
			// Every node that has not answered is reported unreachable,
			// with the context's error, in list order.
			for _, n := range s.nodes {
				if owed[n] > 0 {
					owed[n]--
					errs = append(errs, &NodeError{Node: n, Err: cause(ctx), kind: ErrUnreachable})
				}
			}
			return oks, errs
		}
		owed[o.node]--
		s.mergeRes(o.node, o.meta)
		if o.err == nil {
			oks = append(oks, o)
		} else {
			errs = append(errs, o.err)
		}
	}
	return oks, errs
}

func (s *spec) castOne(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.takeArgs(); err != nil {
		return err
	}
	ctx = s.ownContext(ctx)
	if li := s.localIndex(); li >= 0 {
		return s.cast(ctx, s.nodes[li])
	}
	return s.cast(ctx, s.nodes[rand.IntN(len(s.nodes))])
}

func (s *spec) castAll(ctx context.Context) error {
	if s.g.isClosed() {
		return s.closedErr()
	}
	if len(s.nodes) == 0 {
		return nil
	}
	if err := s.takeArgs(); err != nil {
		return err
	}
	ctx = s.ownContext(ctx)
	for _, n := range s.nodes {
		if err := s.cast(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// localIndex returns the index of the first entry naming the local node,
// or -1.
func (s *spec) localIndex() int {
	for i, n := range s.nodes {
		if s.g.isLocal(n) {
			return i
		}
	}
	return -1
}
