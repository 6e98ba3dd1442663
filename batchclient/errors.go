package batchclient

import (
	"errors"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
)

// The errors a lane makes are declared by package lane, and are the
// same values here (errors.Is holds either way); their documentation is
// this package's.
var (
	// ErrOverloaded is returned in OverflowFailFast mode when the chosen
	// lane's queue is full (by entries or bytes). Back off, or raise
	// QueueEntries/QueueBytes, or switch to OverflowBlock.
	ErrOverloaded = lane.ErrOverloaded
	// ErrConnection wraps the cause when a lane's connection was lost while
	// an entry was queued or a call was waiting for its reply. The server may
	// or may not have run a call that fails with it.
	ErrConnection = lane.ErrConnection
	// ErrHeartbeat is the cause (inside ErrConnection) when the peer sent
	// nothing, not even a heartbeat reply, for HeartbeatTimeout: it is frozen
	// or the path to it is.
	ErrHeartbeat = lane.ErrHeartbeat
	// ErrPeerDown is returned without sending when the last attempt to
	// connect to the address failed; the client keeps reconnecting in the
	// background. It wraps the connect error.
	ErrPeerDown = errors.New("batchclient: peer down")
	// ErrNotBatchPeer is returned by Send for an address whose server has no
	// batch plugin: plain rpcx has nothing to deliver a send to. Install
	// batchserver on that server, or send it a call instead.
	ErrNotBatchPeer = errors.New("batchclient: server has no batch plugin")
	// ErrClosed is returned after Close, and to calls in flight at Close.
	ErrClosed = errors.New("batchclient: client closed")
	// ErrStopped fails the entries in flight on a connection Stop tore down.
	ErrStopped = errors.New("batchclient: connection stopped by Stop")
	// ErrTooLarge is returned for a send bigger than the frame byte cap
	// (the smaller of the client's and the server's MaxFrameBytes); a call
	// or cast that large goes as a plain rpcx request instead, as rpcx
	// would send it. Send a smaller payload, or raise MaxFrameBytes on
	// both sides.
	ErrTooLarge = lane.ErrTooLarge
	// ErrUnsupportedCodec is returned for a serialize type rpcx has no codec
	// for; errors.Is also matches it to rpcx's client.ErrUnsupportedCodec, as
	// rpcx's own client returns. Register a codec in rpcx's share.Codecs,
	// or pick another serialize type.
	ErrUnsupportedCodec = lane.ErrUnsupportedCodec
	// ErrEncode is in the error of a call whose arguments the codec could
	// not encode (errors.Is holds; the error reads as the codec's own, as
	// rpcx's client returns it, and wraps it) or panicked encoding; the
	// call was not sent. Check that the codec supports the arguments' type.
	ErrEncode = lane.ErrEncode
	// ErrDecode is in the error of a call whose reply the codec could not
	// decode into the reply value (it failed or panicked: the reply type
	// does not match what the server sent). The server did run the call,
	// so that error is a client.ServiceError, as rpcx's client returns for
	// a reply it cannot decode: an XClient's Failover or Failtry does not
	// run the call again. Check that the reply type matches what the
	// server's method returns.
	ErrDecode = lane.ErrDecode
)
