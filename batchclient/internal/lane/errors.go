package lane

import (
	"errors"
	"fmt"

	"github.com/smallnest/rpcx/client"
)

// The errors a lane fails entries with. They live here because the lane
// makes them; package batchclient exports each under the same name, and
// its doc comment is the one text of each (the user's): these say only
// which one they are.
var (
	// ErrOverloaded is batchclient.ErrOverloaded.
	ErrOverloaded = errors.New("batchclient: lane queue full")
	// ErrConnection is batchclient.ErrConnection.
	ErrConnection = errors.New("batchclient: connection lost")
	// ErrHeartbeat is batchclient.ErrHeartbeat.
	ErrHeartbeat = errors.New("batchclient: peer missed its heartbeats")
	// ErrTooLarge is batchclient.ErrTooLarge.
	ErrTooLarge = errors.New("batchclient: entry exceeds the frame byte cap")
	// ErrUnsupportedCodec is batchclient.ErrUnsupportedCodec.
	ErrUnsupportedCodec = fmt.Errorf("batchclient: no codec for the serialize type: %w", client.ErrUnsupportedCodec)
	// ErrEncode is batchclient.ErrEncode.
	ErrEncode = errors.New("batchclient: cannot encode the arguments")
	// ErrDecode is batchclient.ErrDecode.
	ErrDecode = errors.New("batchclient: cannot decode the reply")
	// ErrDraining is batchclient.ErrDraining.
	ErrDraining = errors.New("batchclient: server shutting down; the call did not run")
)

// encodeError is the error of a call whose arguments the codec could not
// encode: it reads as the codec's own error, which is what rpcx's client
// returns, and it matches ErrEncode and the codec's error with errors.Is.
type encodeError struct{ Err error }

// Error returns the codec's error text.
func (e *encodeError) Error() string { return e.Err.Error() }

// Unwrap returns ErrEncode and the codec's error.
func (e *encodeError) Unwrap() []error { return []error{ErrEncode, e.Err} }
