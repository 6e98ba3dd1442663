package batchserver

import (
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// rpcx's metadata keys as interface values, made once: converting the
// string-typed keys on every entry allocates.
var (
	reqMetaKey any = share.ReqMetaDataKey
	resMetaKey any = share.ResMetaDataKey
)

// entryContext builds the context a handler sees, as rpcx builds it for a
// plain request: the connection, the request and response metadata, and the
// caller's deadline, counted from when the entry's frame arrived. The entry
// must be ended (end) when it is done. fr is the entry's frame (see
// bytewindow.go).
func entryContext(c *conn, e *codec.Entry, arrived time.Time, fr *frameHold) *entryCtx {
	var deadline time.Time
	if e.TimeoutMicros > 0 {
		deadline = arrived.Add(time.Duration(e.TimeoutMicros) * time.Microsecond)
	}
	ec := newEntryCtx(c.c, arrived, e.Metadata, e.TimeoutMicros > 0, deadline)
	ec.serverTimeout = e.ServerTimeout
	ec.frame = fr
	return ec
}

// runCall runs one call or cast entry the way rpcx runs a request: auth,
// PreHandleRequest plugins, lookup, decode, PreCall plugins, the method,
// PostCall plugins, encode. A call's outcome goes back as a reply (through
// the write hooks); a cast's is only counted. The entry's read hooks, if
// any, have run on the delivery path.
func (p *Plugin) runCall(c *conn, ec *entryCtx, e *codec.Entry, fc *fastcodec.Codec) {
	defer ec.end()
	var dst []byte
	if e.Kind == codec.KindCall {
		dst = c.replyBufs.get()
	}
	payload, err := p.guarded(ec, e, dst, fc)
	if e.Kind != codec.KindCall {
		return
	}
	p.reply(c, ec, e, payload, err, true)
}

// guarded runs execute and turns a panic anywhere in it (AuthFunc, a
// PreCall or PostCall plugin, a codec's Unmarshal on untrusted bytes, the
// handler) into this entry's error, as rpcx recovers a plain request: the
// entry fails, the server goes on.
//
// A call's reply is encoded by appending to dst. fc is the running
// goroutine's codec.
func (p *Plugin) guarded(ec *entryCtx, e *codec.Entry, dst []byte, fc *fastcodec.Codec) (payload []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			// At ERROR with the stack, as rpcx logs a plain request's
			// panic (server/service.go): its default logger shows no less.
			log.Errorf("[handler internal error]: servicepath: %s, servicemethod: %s, err: %v, stacks: %s", e.ServicePath, e.ServiceMethod, r, debug.Stack())
			payload, err = nil, &PanicError{Service: e.ServicePath, Method: e.ServiceMethod, Value: fmt.Sprint(r)}
		}
	}()
	return p.execute(ec, e, dst, fc)
}

// deadlinePassed reports, and counts, an entry whose caller's deadline has
// passed: it had no time left when its frame was written, or the deadline,
// counted from when the frame was read, has passed since (the entry waited
// behind others for a goroutine, or behind its plugins). It is checked when
// the entry's goroutine takes it up and again just before the handler
// starts, so no handler starts after its caller's deadline.
//
// The deadline is arrival time plus the time left, and arrival time has a
// monotonic reading: time.Until then reads only the monotonic clock, where
// time.Now().Before would read the wall clock too (this runs twice per
// entry; the clock reads were 5 % of the server's CPU at 10,000 callers).
func (p *Plugin) deadlinePassed(ec *entryCtx, e *codec.Entry) bool {
	if e.TimeoutMicros < 0 || (ec.hasDeadline && time.Until(ec.dl.deadline) <= 0) {
		p.metrics.errDeadline.Inc(1)
		return true
	}
	return false
}

func (p *Plugin) execute(ec *entryCtx, e *codec.Entry, dst []byte, fc *fastcodec.Codec) (payload []byte, err error) {
	ctx := ec.shareContext()
	if p.deadlinePassed(ec, e) {
		return nil, ErrDeadlinePassed
	}
	if err := p.auth(ec, e); err != nil {
		if e.Kind != codec.KindCall {
			p.preWriteOneway(ec, err)
		}
		return nil, err
	}
	p.preHandle(ec)
	// rpcx looks in its AddHandler router before its services.
	if h := p.router.lookup(e.ServicePath, e.ServiceMethod); h != nil {
		return p.runHandler(ec, e, h, dst)
	}
	m, found := p.services.lookup(e.ServicePath, e.ServiceMethod)
	if m == nil {
		p.metrics.errUnknown.Inc(1)
		// The same texts rpcx gives, so callers see one error on both paths.
		if !found {
			return nil, errors.New("rpcx: can't find service " + e.ServicePath)
		}
		return nil, errors.New("rpcx: can't find method " + e.ServiceMethod)
	}
	st := protocol.SerializeType(e.SerializeType)
	cd := fastcodec.Resolve(st) // once for the argument and the reply
	if cd.Missing() {
		p.metrics.errCodec.Inc(1)
		return nil, fmt.Errorf("can not find codec for %d", e.SerializeType) // rpcx's text
	}
	argPtr, arg := m.newArg()
	// The argument may keep the frame's bytes (rpcx's ByteCodec does), as
	// a plain request's argument keeps its message's: rpcx reads every
	// frame into a buffer of its own that nothing writes to again, and an
	// entry's payload is capped at its end, so the handler owns its bytes.
	if err := fc.DecodeSharedResolved(cd, e.Payload, argPtr); err != nil {
		p.metrics.errCodec.Inc(1)
		m.recycleArg(argPtr)
		return nil, err
	}
	argI, err := p.s.Plugins.DoPreCall(ctx, e.ServicePath, e.ServiceMethod, argPtr)
	if err != nil {
		return nil, err
	}
	if argI != argPtr {
		// A PreCall plugin replaced the argument.
		arg = reflect.ValueOf(argI)
		if m.ArgType().Kind() != reflect.Pointer {
			arg = arg.Elem()
		}
	}
	reply := m.newReply()
	if p.deadlinePassed(ec, e) {
		// PostCall still runs, with the error, as after a failed handler:
		// a plugin that began something in PreCall ends it there.
		err = ErrDeadlinePassed
	} else {
		err = m.Call(ctx, arg, reply)
	}
	replyI, err1 := p.s.Plugins.DoPostCall(ctx, e.ServicePath, e.ServiceMethod, argI, reply.Interface(), err)
	m.recycleArg(argI)
	if err == nil {
		err = err1
	}
	if e.Kind != codec.KindCall || replyI == nil {
		m.recycleReply(replyI)
		return nil, err
	}
	data, encErr := fc.AppendResolved(dst, cd, replyI)
	m.recycleReply(replyI)
	if encErr != nil {
		p.metrics.errCodec.Inc(1)
		if err == nil {
			err = encErr
		}
		return nil, err
	}
	return data, err
}

// PanicError is the error a call gets when its handler panicked. The client
// receives its text.
type PanicError struct {
	Service, Method string
	// Value is the panic value, formatted with fmt.Sprint.
	Value string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("rpcxbatch: handler %s.%s panicked: %s", e.Service, e.Method, e.Value)
}

// auth applies the server's AuthFunc to one entry, as rpcx applies it to
// one plain request: with the entry's path, method and metadata and the
// token the caller put in its metadata.
func (p *Plugin) auth(ec *entryCtx, e *codec.Entry) error {
	if p.s.AuthFunc == nil {
		return nil
	}
	ctx := ec.shareContext()
	req := protocol.NewMessage()
	req.ServicePath, req.ServiceMethod, req.Metadata = e.ServicePath, e.ServiceMethod, ec.requestMetadata(e)
	req.SetSerializeType(protocol.SerializeType(e.SerializeType))
	if err := p.s.AuthFunc(ctx, req, e.Metadata[share.AuthKey]); err != nil {
		p.metrics.errAuth.Inc(1)
		return err
	}
	return nil
}

// runSend delivers one send entry to its handler, on the connection's send
// queue, so that the sends of a lane reach their handlers in order. Its
// read hooks have run; AuthFunc and PreHandleRequest run here, as for a
// oneway request.
func (p *Plugin) runSend(c *conn, ec *entryCtx, e *codec.Entry) {
	defer ec.end()
	ctx := ec.shareContext()
	// Recovered here, before auth: a panic must neither reach rpcx nor stop
	// the lane's delivery.
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			log.Errorf("[handler internal error]: send handler %q panicked: %v, stacks: %s", e.ServicePath, r, debug.Stack())
		}
	}()
	if p.deadlinePassed(ec, e) {
		return
	}
	if err := p.auth(ec, e); err != nil {
		p.preWriteOneway(ec, err)
		return
	}
	p.preHandle(ec)
	fn := p.sendHandler(e.ServicePath)
	if fn == nil {
		p.metrics.errUnknownSend.Inc(1)
		return
	}
	fn(ctx, e.Payload)
}
