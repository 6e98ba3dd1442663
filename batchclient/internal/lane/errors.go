package lane

import (
	"errors"
	"fmt"

	"github.com/smallnest/rpcx/client"
)

// The errors a lane fails entries with. Package batchclient exports each
// under the same name (its documentation is the user's); they live here
// because the lane makes them.
var (
	// ErrOverloaded fails an entry that meets a full queue under FailFast.
	ErrOverloaded = errors.New("rpcxbatch: lane queue is full; back off or raise the queue limits")
	// ErrConnection wraps the cause when the lane's connection was lost.
	ErrConnection = errors.New("rpcxbatch: connection to the batch peer lost")
	// ErrHeartbeat is the cause (inside ErrConnection) when the peer owed
	// an answer past HeartbeatTimeout.
	ErrHeartbeat = errors.New("rpcxbatch: peer missed its heartbeats")
	// ErrTooLarge fails an entry bigger than the frame byte cap.
	ErrTooLarge = errors.New("rpcxbatch: entry exceeds the frame byte cap; send a smaller payload or raise MaxFrameBytes on both sides")
	// ErrUnsupportedCodec fails an entry whose serialize type rpcx has no
	// codec for. It wraps rpcx's client.ErrUnsupportedCodec, the error
	// rpcx's own client fails such a call with.
	ErrUnsupportedCodec = fmt.Errorf("rpcxbatch: no rpcx codec for this serialize type; register one in share.Codecs or pick another: %w", client.ErrUnsupportedCodec)
	// ErrEncode wraps a codec's error or panic while encoding arguments.
	ErrEncode = errors.New("rpcxbatch: cannot encode the arguments; check that the codec supports their type")
	// ErrDecode is in the error of a call whose reply did not decode (the
	// codec failed or panicked); that error is a client.ServiceError.
	ErrDecode = errors.New("rpcxbatch: cannot decode the reply; check that the reply type matches the server's")
	// ErrDraining fails an entry not written because the server began a
	// graceful shutdown.
	ErrDraining = errors.New("rpcxbatch: the batch peer is shutting down and did not run this entry; retry it on another server")
)
