package selector

import "context"

// Policy names one of the group policies of package group.
type Policy int

const (
	// Default leaves the call to the XClient's own selector and fail mode.
	Default Policy = iota
	// CallOne tries the nodes one at a time, the local one first, until one
	// succeeds.
	CallOne
	// CallAny calls the local node alone, or every node in parallel, and
	// takes the first success.
	CallAny
	// CallAll calls every node in parallel and needs every one to succeed.
	CallAll
	// CallAllWait calls every node in parallel and waits for every answer.
	CallAllWait
	// CastOne runs the call on one node, the local one if present, without
	// a reply.
	CastOne
	// CastAll runs the call on every node without a reply.
	CastAll
)

// String returns the ecall name of the policy, such as "call_any".
func (p Policy) String() string {
	names := [...]string{"default", "call_one", "call_any", "call_all", "call_all_wait", "cast_one", "cast_all"}
	if p < 0 || int(p) >= len(names) {
		return "unknown"
	}
	return names[p]
}

type policyKey struct{}

// WithPolicy returns a context that asks a group-aware XClient (see
// group.NewXClient) to run its next Call under policy p. The context also
// tracks the servers tried, as Track does.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	return Track(context.WithValue(ctx, policyKey{}, p))
}

// PolicyFrom returns the policy WithPolicy put in ctx, and whether there
// was one.
func PolicyFrom(ctx context.Context) (Policy, bool) {
	p, ok := ctx.Value(policyKey{}).(Policy)
	return p, ok
}
