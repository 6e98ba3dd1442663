package lane

import (
	"context"
	"errors"
	"fmt"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// The codec at the lane's edges: arguments into entries (on the
// caller's goroutine, or the writer's for Call), replies out of frames.

// ReqMetaKey is rpcx's request-metadata key as an interface value, made
// once: converting the string-typed key on every call allocates.
var ReqMetaKey any = share.ReqMetaDataKey

// newEntry builds an entry and encodes args into it. st is the caller's
// Pending.ServerTimeout (see entryMetadata).
func (l *Lane) newEntry(ctx context.Context, kind codec.Kind, path, method string, args any, est int, st bool) (*entry, error) {
	e := getEntry()
	var err error
	if est > maxKeptPayload {
		// Room for the bytes admission reserved: a large payload grown by
		// append would hold up to a quarter more than the queue counts.
		e.buf = make([]byte, 0, est)
	} else if cap(e.buf) == 0 && kind != codec.KindSend {
		e.buf = l.newPayloadBuf()
	}
	if kind == codec.KindSend {
		// Copied: Send returns before the frame is written, and the caller
		// may reuse its buffer at once.
		b, _ := args.([]byte)
		e.buf = append(e.buf[:0], b...)
	} else {
		e.buf, err = encodeArgs(nil, e.buf[:0], fastcodec.Resolve(l.cfg.SerializeType), args)
		if err == nil {
			l.notePayload(len(e.buf))
		}
	}
	if err != nil {
		putEntry(e)
		if errors.Is(err, fastcodec.ErrNoCodec) {
			return nil, ErrUnsupportedCodec
		}
		l.cfg.Metrics.ErrCodec.Inc(1)
		return nil, err
	}
	e.Kind, e.ServicePath, e.ServiceMethod = kind, path, method
	e.SerializeType = uint8(l.cfg.SerializeType)
	e.Payload = e.buf
	e.entryMetadata(ctx, st)
	l.compressEntry(e)
	return e, nil
}

// compressEntry compresses e's payload as rpcx's client compresses a
// request's (with Option.CompressType, when its encoded arguments are
// larger than codec.CompressThreshold), when the server reads compressed
// entries (Handshake.EntryCompress; codec's compress.go). e.size stays
// the uncompressed entry's: frames are filled, and the byte window
// counted, by what the entries unpack to on the server. A payload the
// compressor fails on goes as it is.
func (l *Lane) compressEntry(e *entry) {
	ct := l.hs.EntryCompress
	if ct == protocol.None || len(e.Payload) <= codec.CompressThreshold {
		return
	}
	z, err := codec.Compress(ct, e.Payload)
	if err != nil {
		return
	}
	e.gain = len(e.Payload) - len(z)
	e.Payload, e.CompressType = z, ct
}

// entryMetadata sets e's metadata, deadline and size from ctx: the
// request metadata ctx carries, copied; or, with st (Pending.ServerTimeout:
// the drop-in found no map in ctx, so none is looked for again), rpcx's
// "__ServerTimeout" when ctx has a deadline.
func (e *entry) entryMetadata(ctx context.Context, st bool) {
	e.deadline, _ = ctx.Deadline()
	if st {
		e.ServerTimeout = !e.deadline.IsZero()
	} else if m, ok := ctx.Value(ReqMetaKey).(map[string]string); ok && len(m) > 0 {
		e.Metadata = CopyMetadata(ctx, m)
	}
	e.size = codec.EntrySize(&e.Entry)
}

// encodeArgs encodes args with the codec cd after dst: on the caller's
// goroutine for Go and Cast (with a nil fc), on the lane's writer for
// Call. A codec error or panic becomes ErrEncode, which fails that call
// alone.
func encodeArgs(fc *fastcodec.Codec, dst []byte, cd fastcodec.Resolved, args any) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, fmt.Errorf("%w: the codec panicked: %v", ErrEncode, r)
		}
	}()
	if fc != nil {
		out, err = fc.AppendResolved(dst, cd, args)
	} else {
		out, err = fastcodec.AppendResolved(dst, cd, args)
	}
	if err != nil && !errors.Is(err, fastcodec.ErrNoCodec) {
		err = &encodeError{Err: err}
	}
	return out, err
}

// newDeferredEntry builds a call entry whose arguments the lane's writer
// encodes (see Submit). It is kept apart from newEntry, and lean, because
// it runs on the caller's goroutine: the less stack a waiting caller
// needs, the less there is for the collector to shrink and the next call
// to grow back. Whether the serialize type has a codec is the writer's
// question too (encodeDeferred: ErrUnsupportedCodec): asked here, it was
// the deepest point of the caller's stack on every call, and a map lookup
// cold in the cache with many callers.
func (l *Lane) newDeferredEntry(ctx context.Context, path, method string, args any, st bool) (*entry, error) {
	e := getCallEntry()
	e.deferred, e.args = true, args
	e.Kind, e.ServicePath, e.ServiceMethod = codec.KindCall, path, method
	e.SerializeType = uint8(l.cfg.SerializeType)
	e.buf, e.Payload = e.buf[:0], nil
	e.entryMetadata(ctx, st)
	return e, nil
}

// CopyMetadata copies the request metadata m found in ctx: rpcx's XClient
// writes the auth token into this map. A function of its own, off the
// common path: ranging over a map takes a large stack frame, and every
// caller's stack would grow for it.
//
//go:noinline
func CopyMetadata(ctx context.Context, m map[string]string) map[string]string {
	if sc, ok := ctx.(*share.Context); ok {
		sc.Lock()
		defer sc.Unlock()
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// DecodeReply decodes an encoded reply with the client's codec. A codec
// that fails or panics on the server's bytes (a reply type that does not
// match the server's, a custom decoder) fails only this call, with a
// decodeError: a client.ServiceError, as rpcx's client makes of a reply
// it cannot decode.
// A caller decoding its own reply passes a nil fc. The reply never
// aliases raw, which the lane reuses, unless own says raw is the call's
// alone: then the reply may keep it (see fastcodec.MayAlias).
func DecodeReply(fc *fastcodec.Codec, st protocol.SerializeType, raw []byte, reply any, own bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &decodeError{fmt.Errorf("%w: the codec panicked: %v", ErrDecode, r)}
		}
	}()
	switch {
	case own:
		err = fastcodec.DecodeShared(st, raw, reply)
	case fc != nil:
		err = fc.Decode(st, raw, reply)
	default:
		err = fastcodec.Decode(st, raw, reply)
	}
	if err != nil {
		return &decodeError{fmt.Errorf("%w: %w", ErrDecode, err)}
	}
	return nil
}

// decodeError fails a call whose reply did not decode. It is a
// client.ServiceError, as rpcx v1.9.4's client makes a reply decode
// failure one (client.go, input: strErr): the server ran the call, so
// rpcx's XClient must not run it again under Failover or Failtry, and
// does not for a ServiceError. It wraps ErrDecode and the codec's error.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }

// IsServiceError makes decodeError a client.ServiceError.
func (e *decodeError) IsServiceError() bool { return true }

func (e *decodeError) Unwrap() error { return e.err }
