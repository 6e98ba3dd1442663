package batchclient

// errClosedInFlight fails the calls in flight at Close: it is ErrClosed,
// as ErrClosed's documentation promises, and ErrStopped too, since Close
// stops every connection as Stop does (code written against either
// sentinel keeps working).
var errClosedInFlight error = closedInFlight{}

type closedInFlight struct{}

func (closedInFlight) Error() string {
	return "batchclient: client closed with the call in flight"
}

func (closedInFlight) Is(target error) bool { return target == ErrClosed || target == ErrStopped }

// stopCause is the error a connection's calls in flight fail with when
// its peer is shut down: by Close, or by Stop.
func (c *Client) stopCause() error {
	if c.closed.Load() {
		return errClosedInFlight
	}
	return ErrStopped
}
