package group

import (
	"errors"
	"fmt"
	"strings"

	"github.com/smallnest/rpcx/client"
)

var (
	// ErrNoneAvailable is returned by CallAny and CallAll when no node of
	// the list could be reached (and unreachable nodes were not counted as
	// errors), and, through ErrEmptyNodes, for an empty list. Check the
	// node list and that the servers are up, or pass Unreachable(true) to
	// see why each failed.
	ErrNoneAvailable = errors.New("group: no node available")
	// ErrEmptyNodes is returned for an empty node list by CallOne, CallAny,
	// CallAll and CastOne. It wraps ErrNoneAvailable, as ecall returns
	// none_is_available for an empty list. Give the group nodes
	// (WithNodes, WithDiscovery), or the call some (On).
	ErrEmptyNodes = fmt.Errorf("%w: empty node list", ErrNoneAvailable)

	// ErrRejected is the kind of a NodeError whose node ran the call and
	// answered with an error (the handler returned one, or panicked).
	ErrRejected = errors.New("group: the node rejected the call")
	// ErrPanic is the kind of a NodeError whose handler panicked; such an
	// error is also ErrRejected. errors.As to *PanicError gives the value.
	ErrPanic = errors.New("group: the handler panicked")
	// ErrUnreachable is the kind of a NodeError whose node gave no answer:
	// it could not be dialled, its connection was lost, the per-node call's
	// context ended (NodeTimeout, or the caller's), the client is closed.
	// The cause (batchclient.ErrPeerDown, batchclient.ErrConnection,
	// client.ErrShutdown, a dial error, context.DeadlineExceeded, ...) is
	// wrapped too.
	ErrUnreachable = errors.New("group: the node could not be reached")

	// ErrEncode is returned by every group operation whose arguments the
	// Caller's codec cannot encode (or cannot decode back into a copy of
	// their own type, see Group): nothing is sent and no node, local or
	// remote, runs the call. CallAllWait reports it for every node. The
	// codec's error is wrapped too; fix the argument type.
	ErrEncode = errors.New("group: cannot encode the arguments with the caller's codec")
	// ErrClosed is returned by every group operation once Close has
	// begun; CallAllWait reports it for every node. Make a new Group with
	// New.
	ErrClosed = errors.New("group: Group closed")
)

// NodeError is one node's failure: the node, the kind (ErrRejected,
// ErrPanic or ErrUnreachable, for errors.Is) and the cause.
type NodeError struct {
	// Node is the address as it appears in the node list.
	Node string
	// Err is the cause: the handler's error as the transport returned it
	// (for remote nodes an rpcx client.ServiceError), a *PanicError, or the
	// transport's error for an unreachable node.
	Err error

	kind error
}

// Error returns the node and the cause.
func (e *NodeError) Error() string {
	return fmt.Sprintf("node %s: %v", e.Node, e.Err)
}

// Unwrap returns the kinds and the cause, so that errors.Is(err,
// ErrRejected), errors.Is(err, ErrPanic), errors.Is(err, ErrUnreachable)
// and errors.Is/As on the cause all work.
func (e *NodeError) Unwrap() []error {
	if e.kind == ErrPanic {
		return []error{ErrRejected, ErrPanic, e.Err}
	}
	return []error{e.kind, e.Err}
}

// Unreachable reports whether the node gave no answer.
func (e *NodeError) Unreachable() bool { return e.kind == ErrUnreachable }

// PanicError is the cause of a rejection whose handler panicked.
type PanicError struct {
	// Value is the panic value itself for a local node, and the server's
	// error text (which holds the formatted value) for a remote one.
	Value any
	// Err is the error the transport returned for a remote panic, or nil.
	Err error
}

// Error formats the panic value.
func (e *PanicError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("handler panicked: %v", e.Value)
}

// Unwrap returns the transport's error, if any.
func (e *PanicError) Unwrap() error { return e.Err }

// Rejections is the error of CallOne and CallAny when no node succeeded:
// one *NodeError per node that answered with an error (and, with
// Unreachable(true), per node that could not be reached), in the order
// they were recorded. With the default Unreachable(false) CallOne returns
// an empty Rejections when every node was unreachable, as ecall returns
// {error, []}.
type Rejections []*NodeError

// Error lists every node's error.
func (r Rejections) Error() string {
	if len(r) == 0 {
		return "group: no node succeeded; every node was unreachable"
	}
	parts := make([]string, len(r))
	for i, e := range r {
		parts[i] = e.Error()
	}
	return fmt.Sprintf("group: no node succeeded: %s", strings.Join(parts, "; "))
}

// Unwrap returns the node errors, so errors.Is(err, ErrRejected) holds
// when any node rejected.
func (r Rejections) Unwrap() []error {
	out := make([]error, len(r))
	for i, e := range r {
		out[i] = e
	}
	return out
}

// Markers of a panic in a server's error text: the batch plugin's
// ("handler X.Y panicked: v") and plain rpcx's ("[service internal error]:
// v, method: ...").
var panicMarkers = []string{"panicked: ", "[service internal error]"}

// classify turns a transport error of a remote call into a NodeError: an
// rpcx ServiceError came from the server (a rejection, or a panic when its
// text says so); anything else means the node gave no answer.
func classify(node string, err error) *NodeError {
	var se client.ServiceError
	if errors.As(err, &se) && se.IsServiceError() {
		text := se.Error()
		for _, m := range panicMarkers {
			if strings.Contains(text, m) {
				return &NodeError{Node: node, Err: &PanicError{Value: text, Err: err}, kind: ErrPanic}
			}
		}
		return &NodeError{Node: node, Err: err, kind: ErrRejected}
	}
	return &NodeError{Node: node, Err: err, kind: ErrUnreachable}
}

// rejection wraps a local handler's error.
func rejection(node string, err error) *NodeError {
	var pe *PanicError
	if errors.As(err, &pe) {
		return &NodeError{Node: node, Err: err, kind: ErrPanic}
	}
	return &NodeError{Node: node, Err: err, kind: ErrRejected}
}
