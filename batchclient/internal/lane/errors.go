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
	ErrOverloaded = errors.New("rpcxbatch: lane queue is full; back off or raise the queue limits")
	// ErrConnection is batchclient.ErrConnection.
	ErrConnection = errors.New("rpcxbatch: connection to the batch peer lost")
	// ErrHeartbeat is batchclient.ErrHeartbeat.
	ErrHeartbeat = errors.New("rpcxbatch: peer missed its heartbeats")
	// ErrTooLarge is batchclient.ErrTooLarge.
	ErrTooLarge = errors.New("rpcxbatch: entry exceeds the frame byte cap; send a smaller payload or raise MaxFrameBytes on both sides")
	// ErrUnsupportedCodec is batchclient.ErrUnsupportedCodec.
	ErrUnsupportedCodec = fmt.Errorf("rpcxbatch: no rpcx codec for this serialize type; register one in share.Codecs or pick another: %w", client.ErrUnsupportedCodec)
	// ErrEncode is batchclient.ErrEncode.
	ErrEncode = errors.New("rpcxbatch: cannot encode the arguments; check that the codec supports their type")
	// ErrDecode is batchclient.ErrDecode.
	ErrDecode = errors.New("rpcxbatch: cannot decode the reply; check that the reply type matches the server's")
	// ErrDraining is batchclient.ErrDraining.
	ErrDraining = errors.New("rpcxbatch: the batch peer is shutting down and did not run this entry; retry it on another server")
)

// encodeError is the error of a call whose arguments the codec could not
// encode: it reads as the codec's own error, which is what rpcx's client
// returns, and it matches ErrEncode and the codec's error with errors.Is.
type encodeError struct{ Err error }

// Error returns the codec's error text.
func (e *encodeError) Error() string { return e.Err.Error() }

// Unwrap returns ErrEncode and the codec's error.
func (e *encodeError) Unwrap() []error { return []error{ErrEncode, e.Err} }
