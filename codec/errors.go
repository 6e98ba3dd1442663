package codec

import "errors"

var (
	// ErrMalformed reports a frame whose bytes do not follow the format. The
	// connection that sent it cannot be trusted to be in sync any more and
	// should be closed.
	ErrMalformed = errors.New("codec: malformed frame")
	// ErrVersion reports a frame written by an incompatible protocol version;
	// upgrade the older side.
	ErrVersion = errors.New("codec: unsupported frame version")
	// ErrFrameTooLarge reports a frame or message larger than the configured
	// byte cap; raise the cap on both sides or send smaller payloads.
	ErrFrameTooLarge = errors.New("codec: frame exceeds the byte cap")
	// ErrTooManyEntries reports a frame holding more entries than the
	// configured batch cap.
	ErrTooManyEntries = errors.New("codec: frame exceeds the entry cap")
)
