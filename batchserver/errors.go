package batchserver

import "errors"

var (
	// ErrInvalidOption reports an option value New cannot use.
	ErrInvalidOption = errors.New("batchserver: invalid option")
	// ErrDeadlinePassed is the error an entry gets when its caller's deadline
	// had passed before the server could start it; the entry was not run.
	// Its text reaches the caller as the call's error; package group (of
	// this release and older ones) finds "deadline passed" in it.
	ErrDeadlinePassed = errors.New("batchserver: caller's deadline passed before the call ran")
	// ErrWindowExceeded is why a connection is closed when its client keeps
	// far more entries unfinished than the window the handshake granted.
	ErrWindowExceeded = errors.New("batchserver: client exceeded its window of unfinished entries")
	// ErrByteWindowExceeded is why a connection is closed when its client
	// makes the server hold far more bytes of unfinished frames than the
	// byte window the handshake granted (WithWindowBytes). A client older
	// than the byte window does not keep within it: upgrade it, or raise
	// WithWindowBytes.
	ErrByteWindowExceeded = errors.New("batchserver: client exceeded its byte window of unfinished frames")
	// ErrReplyTooLarge is the error a call gets instead of a reply that
	// would not fit one frame the client reads (the smaller of both sides'
	// MaxFrameBytes), when the client is of a release that reads no reply
	// frame above that cap (codec.MetaLargeReplies; a client of this
	// release gets the reply alone in a frame of its own): the reply is
	// dropped, the connection goes on. Return less, or raise MaxFrameBytes
	// on both sides.
	ErrReplyTooLarge = errors.New("batchserver: reply exceeds the frame byte cap")
	// ErrSendHandlerExists reports a second HandleSend for the same name.
	ErrSendHandlerExists = errors.New("batchserver: send handler already registered")
)

// PanicError is the error of an entry whose AddHandler handler, plugin
// hook, AuthFunc or codec panicked (a service method's panic is rpcx's
// own *server.RpcServiceInternalError, as on a plain request). Its text is
// the panic value's, which is what rpcx v1.9.4 writes to the caller for
// such a panic (processOneRequest). A PreWriteResponse hook gets it for an
// entry refused by a panicking read hook.
type PanicError struct {
	Service, Method string
	// Value is the panic value, formatted with fmt.Sprint.
	Value string
}

// Error returns the panic value's text, as rpcx's caller reads it.
func (e *PanicError) Error() string { return e.Value }
