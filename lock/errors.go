package lock

import "errors"

var (
	// ErrDeadlock is returned by a lock request that closed a wait-for
	// cycle and was the younger holder in it. The holder keeps what it held
	// before the request; the usual answer is to release and retry.
	ErrDeadlock = errors.New("lock: deadlock")
	// ErrProbeLimit is returned by a lock request whose deadlock walk
	// visited more than the probe limit of locks without an answer. The
	// holder keeps what it held before the request; release and retry, or
	// take keys in a fixed order so that long chains cannot form.
	ErrProbeLimit = errors.New("lock: deadlock walk passed its probe limit")
	// ErrClosed is returned by the methods of a Holder that was closed, or
	// whose context ended, and of a Node that was closed. A request to
	// another node that was closed fails with ErrNodeLost. Make a new
	// holder (on an open node).
	ErrClosed = errors.New("lock: holder or node closed")
	// ErrUpgrade is returned when a holder asks for Exclusive on a key it
	// holds Shared while other holders share it or others wait for it.
	// Release the shared lock and ask for Exclusive instead.
	ErrUpgrade = errors.New("lock: cannot upgrade a shared lock others share or wait for")
	// ErrAborted is a node's refusal of a request its holder withdrew
	// (another node of an all-or-nothing request failed, or the holder was
	// closed) before it arrived or while it waited. Lock and LockOn do not
	// return it: a holder withdraws a request only once its call
	// returned, so a request refused that way while its holder still
	// waits was dropped by the node, and fails with ErrNodeLost.
	ErrAborted = errors.New("lock: request withdrawn by its holder")
	// ErrNodeLost is returned when a node of the request is unreachable,
	// restarted, was closed, or dropped the request (it had heard nothing
	// from the holder's node for NodeTimeout, and dropped that node's
	// holders). The request holds nothing anywhere; the holder keeps what
	// it held before. Retry against the nodes that are up.
	ErrNodeLost = errors.New("lock: node lost")
	// ErrLockLost is the cause of a Holder's context, and the error of its
	// requests, once its lease on another node where it holds locks ran
	// out: that node did not answer in time, and may drop the holder's
	// locks there and grant them to others. Stop acting on the locks, and
	// close the holder (its local locks stay held until then).
	ErrLockLost = errors.New("lock: lease on a node ran out")
	// ErrBadRequest is returned for an invalid request: no keys, an empty
	// key, an unknown mode or no nodes.
	ErrBadRequest = errors.New("lock: invalid request")
	// ErrConfig is returned by New for a Config it cannot run with.
	ErrConfig = errors.New("lock: invalid Config")
)
